#include "neuronsim/kernels/elementwise.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "expr_steps.h"
#include "neuronsim/device_model/executor.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

std::vector<std::vector<int64_t>> strides_of(const std::vector<TensorDesc>& ts,
                                             const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& t : ts) out.push_back(broadcast_strides(t, sizes));
  return out;
}

// Where each tile's data lives in SBUF: `slots` copies of `tiles_per_slot` tiles.
struct SbufPlan {
  uint64_t base = 0, tile_bytes = 0;
  uint32_t per_slot = 0;
  uint64_t at(int slot, uint32_t i) const {
    return base + (uint64_t{slot} * per_slot + i) * tile_bytes;
  }
};

}  // namespace

Program build_elementwise(const std::string& name, const std::vector<TensorDesc>& inputs,
                          const TensorDesc& out, const Expr& expr, const CoreParams& core) {
  return build_elementwise(name, inputs, {{out, static_cast<int>(expr.steps.size()) - 1}}, expr,
                           core);
}

Program build_elementwise(const std::string& name, const std::vector<TensorDesc>& inputs,
                          const std::vector<ExprOutput>& outputs, const Expr& expr,
                          const CoreParams& core) {
  if (expr.steps.empty()) throw std::invalid_argument("elementwise: empty expression");
  if (outputs.empty()) throw std::invalid_argument("elementwise: no output");
  for (const ExprOutput& o : outputs) {
    if (o.step < 0 || o.step >= static_cast<int>(expr.steps.size()) ||
        o.out.sizes != outputs[0].out.sizes) {
      throw std::invalid_argument("elementwise: outputs must be steps of one shape");
    }
  }
  const TensorDesc& out = outputs[0].out;
  const DType cdt = expr.integer ? DType::kInt32 : DType::kFp32;
  ProgramBuilder b(name, core);
  const uint32_t nbuf = static_cast<uint32_t>(inputs.size() + expr.steps.size());
  // Two slots of every buffer within ~3/4 of a partition.
  const uint64_t budget = core.sbuf.partition_bytes * 3 / 4;
  const uint64_t max_free = std::max<uint64_t>(
      1, std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (2 * nbuf * 4)));
  // Operands for tiling: inputs, the other outputs, then the first output (the layout that
  // decides transposed loads).
  std::vector<TensorDesc> all = inputs;
  for (size_t k = 1; k < outputs.size(); ++k) all.push_back(outputs[k].out);
  all.push_back(out);
  // Float inputs stored transposed relative to the output go through TensorE transposes (one
  // PSUM bank per input and slot); others, and integer data, are gathered by the DMA.
  const uint32_t edge = std::min(core.tensor.rows, core.tensor.columns);
  const size_t max_transposed = 4;
  std::vector<bool> transposable(all.size(), false);
  for (size_t i = 0; i < inputs.size() && i < max_transposed; ++i) {
    transposable[i] = is_float(inputs[i].dtype) && !expr.integer;
  }
  const auto strides = strides_of(all, out.sizes);
  auto tiles = make_transpose_tiles(out.sizes, strides, transposable, edge);
  if (tiles.empty()) tiles = make_tiles(out.sizes, strides, core.sbuf.partitions, max_free);
  bool any_transposed = false;
  for (const Tile& t : tiles) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      any_transposed |= transposable[i] && reads_transposed(t, t.operands[i], edge);
    }
  }
  uint64_t stage_off = 0, tr_bank[2][max_transposed] = {};
  if (any_transposed) {
    stage_off = b.alloc_sbuf(2 * max_transposed * uint64_t{edge} * 4);
    for (auto& slot : tr_bank) {
      for (auto& bank : slot) bank = b.alloc_psum_bank();
    }
  }
  uint64_t tile_free = 1;
  for (const Tile& t : tiles) tile_free = std::max(tile_free, t.free_elements());
  SbufPlan plan{b.alloc_sbuf(2 * nbuf * tile_free * 4), tile_free * 4, nbuf};

  const StreamId qload = dma_queue(0), qstore = dma_queue(1);
  Token slot_free[2];
  for (size_t ti = 0; ti < tiles.size(); ++ti) {
    const Tile& t = tiles[ti];
    const int slot = static_cast<int>(ti % 2);
    auto buf = [&](uint32_t i) {
      AccessPattern ap = isa::sbuf(cdt, 0, t.partitions, plan.at(slot, i), {{1, t.free_sizes[0]}});
      if (t.nfree == 2) {
        ap.dims[0] = {t.free_sizes[1], t.free_sizes[0]};
        ap.dims[1] = {1, t.free_sizes[1]};
        ap.ndims = 2;
      }
      return ap;
    };
    // An input broadcast along the innermost free dim (a [.., n, 1] operand of an [.., n, m]
    // result) is loaded once per row and read with stride 0 by the engines: a DMA that repeats
    // each element would move one element per descriptor.
    const size_t inner = t.nfree - 1;
    auto broadcast_inner = [&](size_t i) {
      return t.free_sizes[inner] > 1 && t.operands[i].free_strides[inner] == 0;
    };
    // Loads; inputs read transposed land in a staging tile first.
    std::vector<bool> transposed(inputs.size(), false);
    std::vector<AccessPattern> stage(inputs.size());
    b.wait(qload, slot_free[slot]);
    for (size_t i = 0; i < inputs.size(); ++i) {
      transposed[i] = transposable[i] && reads_transposed(t, t.operands[i], edge);
      if (transposed[i]) {
        stage[i] = isa::sbuf_tile(
            inputs[i].dtype, t.free_sizes[0],
            stage_off + (uint64_t{static_cast<uint32_t>(slot)} * max_transposed + i) * edge * 4,
            t.partitions);
        b.emit(qload, isa::dma_copy(stage[i], transposed_rows_ap(inputs[i], t, t.operands[i])));
        continue;
      }
      AccessPattern src = tile_ap(inputs[i], t, t.operands[i]);
      AccessPattern dst = buf(static_cast<uint32_t>(i));
      if (broadcast_inner(i)) {
        src.ndims = dst.ndims = 1;
        if (t.nfree == 1) src.dims[0].size = 1;
        dst.dims[0] = {1, src.dims[0].size};
      }
      b.emit(qload, isa::dma_copy(dst, src));
    }
    const Token loaded = inputs.empty() ? Token{} : b.mark(qload);
    Token transposes_done;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!transposed[i]) continue;
      const AccessPattern ps =
          isa::psum_tile(inputs[i].dtype, t.partitions, tr_bank[slot][i], t.free_sizes[0]);
      b.wait(kTensor, loaded);
      b.wait(kTensor, slot_free[slot]);  // the steps of two tiles ago have read this bank
      b.emit(kTensor, isa::transpose(ps, stage[i]));
      // Into the input's SBUF buffer: a step may read two such inputs (or one twice), and an
      // engine reads at most one operand from PSUM.
      b.wait(kVector, b.mark(kTensor));
      b.wait(kVector, slot_free[slot]);
      b.emit(kVector, isa::tensor_copy(buf(static_cast<uint32_t>(i)), ps));
      transposes_done = b.mark(kVector);
    }
    // Compute: each step on its engine, waiting for the steps it reads.
    std::vector<Token> done(expr.steps.size());
    auto tensor_arg = [&](const Arg& a) {
      AccessPattern ap =
          buf(a.kind == Arg::kInput ? a.index : static_cast<uint32_t>(inputs.size()) + a.index);
      if (a.kind == Arg::kInput && broadcast_inner(a.index)) {
        if (t.nfree == 2) ap.dims[0].stride = 1;
        ap.dims[inner].stride = 0;
      }
      return ap;
    };
    for (size_t s = 0; s < expr.steps.size(); ++s) {
      const Step& st = expr.steps[s];
      const StreamId e = step_engine(st);
      b.wait(e, slot_free[slot]);  // the store of two tiles ago has read this slot
      for (const Arg* a : {&st.a, &st.b, &st.c}) {
        if (a->kind == Arg::kInput) b.wait(e, transposed[a->index] ? transposes_done : loaded);
        if (a->kind == Arg::kStep) b.wait(e, done[a->index]);
      }
      emit_step(b, st, buf(static_cast<uint32_t>(inputs.size() + s)), tensor_arg);
      done[s] = b.mark(e);
    }
    // Stores; the slot is free again once the stores have read it.
    for (size_t k = 0; k < outputs.size(); ++k) {
      const size_t operand = k == 0 ? all.size() - 1 : inputs.size() + k - 1;
      const uint32_t step = static_cast<uint32_t>(outputs[k].step);
      b.wait(qstore, done[step]);
      b.emit(qstore, isa::dma_copy(tile_ap(outputs[k].out, t, t.operands[operand]),
                                   buf(static_cast<uint32_t>(inputs.size()) + step)));
    }
    slot_free[slot] = b.mark(qstore);
  }
  return std::move(b).build();
}

Program build_copy(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                   const CoreParams& core) {
  return build_copies(name, {{in, out}}, core);
}

Program build_copies(const std::string& name,
                     const std::vector<std::pair<TensorDesc, TensorDesc>>& pairs,
                     const CoreParams& core) {
  ProgramBuilder b(name, core);
  const uint64_t budget = core.sbuf.partition_bytes * 3 / 4;
  uint64_t es = 1;
  for (const auto& [in, out] : pairs)
    es = std::max({es, dtype_size(in.dtype), dtype_size(out.dtype)});
  const uint64_t max_free = std::max<uint64_t>(1, budget / (2 * es));
  // A float source stored transposed relative to its destination loads as contiguous rows and
  // is transposed on TensorE (then copied out of PSUM by VectorE); the rest is DMA only.
  const uint32_t edge = std::min(core.tensor.rows, core.tensor.columns);
  std::vector<std::vector<Tile>> tiles(pairs.size());
  std::vector<bool> transposing(pairs.size(), false);
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto& [in, out] = pairs[k];
    const auto strides = strides_of({in, out}, out.sizes);
    if (is_float(in.dtype) && is_float(out.dtype)) {
      tiles[k] = make_transpose_tiles(out.sizes, strides, {true, false}, edge);
      transposing[k] = !tiles[k].empty();
    }
    if (!transposing[k]) tiles[k] = make_tiles(out.sizes, strides, core.sbuf.partitions, max_free);
  }
  const uint64_t base = b.alloc_sbuf(2 * max_free * es);
  uint64_t stage_off = 0, tr_bank[2] = {};
  if (std::find(transposing.begin(), transposing.end(), true) != transposing.end()) {
    stage_off = b.alloc_sbuf(2 * uint64_t{edge} * es);
    for (auto& bank : tr_bank) bank = b.alloc_psum_bank();
  }
  Token slot_free[2];
  const StreamId qload = dma_queue(0), qstore = dma_queue(1);
  uint64_t n = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto& [in, out] = pairs[k];
    for (const Tile& t : tiles[k]) {
      const int slot = static_cast<int>(n++ % 2);
      AccessPattern s = isa::sbuf(out.dtype, 0, t.partitions, base + slot * max_free * es,
                                  {{1, static_cast<uint32_t>(t.free_elements())}});
      b.wait(qload, slot_free[slot]);
      if (transposing[k] && reads_transposed(t, t.operands[0], edge)) {
        const AccessPattern stage =
            isa::sbuf_tile(in.dtype, t.free_sizes[0], stage_off + slot * edge * es, t.partitions);
        b.emit(qload, isa::dma_copy(stage, transposed_rows_ap(in, t, t.operands[0])));
        const AccessPattern ps =
            isa::psum_tile(in.dtype, t.partitions, tr_bank[slot], t.free_sizes[0]);
        b.wait(kTensor, b.mark(qload));
        b.wait(kTensor, slot_free[slot]);
        b.emit(kTensor, isa::transpose(ps, stage));
        b.wait(kVector, b.mark(kTensor));
        b.wait(kVector, slot_free[slot]);
        b.emit(kVector, isa::tensor_copy(s, ps));
        b.wait(qstore, b.mark(kVector));
      } else {
        b.emit(qload, isa::dma_copy(s, tile_ap(in, t, t.operands[0])));
        b.wait(qstore, b.mark(qload));
      }
      b.emit(qstore, isa::dma_copy(tile_ap(out, t, t.operands[1]), s));
      slot_free[slot] = b.mark(qstore);
    }
  }
  return std::move(b).build();
}

Program build_triangle(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                       int64_t diagonal, bool lower, const CoreParams& core) {
  ProgramBuilder b(name, core);
  const int64_t nd = out.dim();
  if (nd < 2) throw std::invalid_argument("tril/triu need at least 2 dims");
  const int64_t R = out.sizes[nd - 2], C = out.sizes[nd - 1];
  const std::vector<int64_t> is = strides_of({in}, out.sizes)[0];
  const uint32_t P = core.sbuf.partitions;
  const uint32_t chunk = static_cast<uint32_t>(std::min<int64_t>(C, 8192));
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t{chunk} * 4),
                 m_off = b.alloc_sbuf(2 * uint64_t{chunk} * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token slot_free[2];
  uint64_t n = 0;
  int64_t batches = 1;
  for (int64_t d = 0; d < nd - 2; ++d) batches *= out.sizes[d];
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t in_base = 0, out_base = 0, rem = bi;
    for (int64_t d = nd - 3; d >= 0; --d) {
      const int64_t i = rem % out.sizes[d];
      rem /= out.sizes[d];
      in_base += i * is[d];
      out_base += i * out.strides[d];
    }
    for (int64_t r0 = 0; r0 < R; r0 += P) {
      const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, R - r0));
      for (int64_t c0 = 0; c0 < C; c0 += chunk) {
        const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, C - c0));
        const int s = static_cast<int>(n++ % 2);
        const AccessPattern x =
            isa::sbuf_tile(DType::kFp32, p, x_off + s * uint64_t{chunk} * 4, cw);
        const AccessPattern m =
            isa::sbuf_tile(DType::kFp32, p, m_off + s * uint64_t{chunk} * 4, cw);
        auto ap = [&](const TensorDesc& t, int64_t base, int64_t rs, int64_t cs) {
          return hbm_ap(t, base + r0 * rs + c0 * cs, p, rs, {{cs, cw}});
        };
        b.wait(qin, slot_free[s]);
        b.emit(qin, isa::dma_copy(x, ap(in, in_base, is[nd - 2], is[nd - 1])));
        const Token loaded = b.mark(qin);
        b.wait(kGpSimd, slot_free[s]);
        // m = col - row, then the mask, then select.
        b.emit(kGpSimd, isa::iota(m, static_cast<int32_t>(c0 - r0), -1, {1}));
        const Token iota_done = b.mark(kGpSimd);
        b.wait(kVector, loaded);
        b.wait(kVector, iota_done);
        b.emit(kVector, isa::tensor_scalar(m, m, lower ? AluOp::kIsLe : AluOp::kIsGe,
                                           isa::imm(static_cast<float>(diagonal))));
        b.emit(kVector, isa::select(x, m, x, 0.0f));
        b.wait(qout, b.mark(kVector));
        b.emit(qout, isa::dma_copy(ap(out, out_base, out.strides[nd - 2], out.strides[nd - 1]), x));
        slot_free[s] = b.mark(qout);
      }
    }
  }
  return std::move(b).build();
}

Program build_arange(const std::string& name, const TensorDesc& out, double start, double step,
                     const CoreParams& core) {
  ProgramBuilder b(name, core);
  const int64_t n = static_cast<int64_t>(out.numel());
  const int64_t stride = out.strides.empty() ? 1 : out.strides[0];
  const uint32_t P = core.sbuf.partitions;
  const int64_t F = std::max<int64_t>(1, std::min<int64_t>((n + P - 1) / P, 8192));
  const uint64_t t_off = b.alloc_sbuf(2 * uint64_t(F) * 4);
  Token slot_free[2];
  for_each_row_block(n, F, P, [&](const RowBlock& blk) {
    const uint32_t p = blk.rows, cols = blk.cols;
    const int64_t first = blk.first;
    const int s = static_cast<int>(blk.index % 2);
    const AccessPattern t = isa::sbuf_tile(DType::kFp32, p, t_off + s * uint64_t(F) * 4, cols);
    b.wait(kGpSimd, slot_free[s]);
    b.emit(kGpSimd, isa::iota(t, static_cast<int32_t>(first), static_cast<int32_t>(F), {1}));
    b.wait(kVector, b.mark(kGpSimd));
    b.emit(kVector, isa::tensor_scalar(t, t, AluOp::kMultiply, isa::imm(static_cast<float>(step)),
                                       AluOp::kAdd, isa::imm(static_cast<float>(start))));
    b.wait(dma_queue(0), b.mark(kVector));
    b.emit(dma_queue(0),
           isa::dma_copy(hbm_ap(out, first * stride, p, F * stride, {{stride, cols}}), t));
    slot_free[s] = b.mark(dma_queue(0));
  });
  return std::move(b).build();
}

Program build_fill(const std::string& name, const TensorDesc& out, float value,
                   const CoreParams& core) {
  Expr e;
  e.alu(AluOp::kBypass, Arg::constant(value), Arg::constant(0));
  return build_elementwise(name, {}, out, e, core);
}

}  // namespace neuronsim::kernels
