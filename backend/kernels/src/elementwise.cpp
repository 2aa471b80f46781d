#include "neuronsim/kernels/elementwise.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device/executor.h"
#include "neuronsim/device/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device;
using Token = ProgramBuilder::Token;

Arg Expr::alu(AluOp op, Arg a, Arg b) {
  Step s;
  s.kind = Step::kAlu;
  s.alu = op;
  s.a = a;
  s.b = b;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

Arg Expr::act(ActFunc f, Arg a, float scale, float bias) {
  Step s;
  s.kind = Step::kAct;
  s.act = f;
  s.a = a;
  s.scale = scale;
  s.bias = bias;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

Arg Expr::select(Arg pred, Arg on_true, Arg on_false) {
  Step s;
  s.kind = Step::kSelect;
  s.a = pred;
  s.b = on_true;
  s.c = on_false;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

namespace {

AccessPattern hbm_ap(const TensorDesc& t, const Tile& tile, const TileOperand& o) {
  AccessPattern ap;
  ap.space = MemSpace::kHbm;
  ap.dtype = t.dtype;
  ap.partitions = tile.partitions;
  ap.partition_stride = o.partition_stride;
  ap.offset = static_cast<uint64_t>(static_cast<int64_t>(t.address) +
                                    o.offset * static_cast<int64_t>(dtype_size(t.dtype)));
  ap.ndims = tile.nfree;
  ap.dims[0] = {o.free_strides[0], tile.free_sizes[0]};
  if (tile.nfree == 2) ap.dims[1] = {o.free_strides[1], tile.free_sizes[1]};
  return ap;
}

std::vector<std::vector<int64_t>> strides_of(const std::vector<TensorDesc>& ts,
                                             const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& t : ts) {
    if (t.sizes.size() > sizes.size()) throw std::invalid_argument("operand rank exceeds output rank");
    // Right-align (broadcast) the operand onto the output shape.
    std::vector<int64_t> s(sizes.size(), 0);
    const size_t off = sizes.size() - t.sizes.size();
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] != 1 && t.sizes[d] != sizes[off + d]) {
        throw std::invalid_argument(fmt::format("operand {} does not broadcast to the output", t.to_string()));
      }
      s[off + d] = t.sizes[d] == 1 ? 0 : t.strides[d];
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Where each tile's data lives in SBUF: `slots` copies of `tiles_per_slot` tiles.
struct SbufPlan {
  uint64_t base = 0, tile_bytes = 0;
  uint32_t per_slot = 0;
  uint64_t at(int slot, uint32_t i) const { return base + (uint64_t{slot} * per_slot + i) * tile_bytes; }
};

}  // namespace

Program build_elementwise(const std::string& name, const std::vector<TensorDesc>& inputs,
                          const TensorDesc& out, const Expr& expr, const CoreParams& core) {
  if (expr.steps.empty()) throw std::invalid_argument("elementwise: empty expression");
  const DType cdt = expr.integer ? DType::kInt32 : DType::kFp32;
  ProgramBuilder b(name, core);
  const uint32_t nbuf = static_cast<uint32_t>(inputs.size() + expr.steps.size());
  // Two slots of every buffer within ~3/4 of a partition.
  const uint64_t budget = core.sbuf.partition_bytes * 3 / 4;
  const uint64_t max_free = std::max<uint64_t>(1, std::min<uint64_t>(core.vector.max_free_elements_sbuf,
                                                                     budget / (2 * nbuf * 4)));
  std::vector<TensorDesc> all = inputs;
  all.push_back(out);
  const auto tiles = make_tiles(out.sizes, strides_of(all, out.sizes), core.sbuf.partitions, max_free);
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
    // Loads.
    b.wait(qload, slot_free[slot]);
    for (size_t i = 0; i < inputs.size(); ++i) {
      b.emit(qload, isa::dma_copy(buf(static_cast<uint32_t>(i)), hbm_ap(inputs[i], t, t.operands[i])));
    }
    const Token loaded = inputs.empty() ? Token{} : b.mark(qload);
    // Compute: each step on its engine, waiting for the steps it reads.
    std::vector<Token> done(expr.steps.size());
    auto tensor_arg = [&](const Arg& a) { return buf(a.kind == Arg::kInput ? a.index : static_cast<uint32_t>(inputs.size()) + a.index); };
    for (size_t s = 0; s < expr.steps.size(); ++s) {
      const Step& st = expr.steps[s];
      const StreamId e = st.kind == Step::kAct ? kScalar : kVector;
      b.wait(e, slot_free[slot]);  // the store of two tiles ago has read this slot
      for (const Arg* a : {&st.a, &st.b, &st.c}) {
        if (a->kind == Arg::kInput) b.wait(e, loaded);
        if (a->kind == Arg::kStep) b.wait(e, done[a->index]);
      }
      const AccessPattern dst = buf(static_cast<uint32_t>(inputs.size() + s));
      if (st.kind == Step::kAct) {
        if (st.a.kind == Arg::kImm) {
          b.emit(e, isa::memset(dst, apply_activation(st.act, st.a.imm * st.scale + st.bias)));
        } else {
          b.emit(e, isa::activation(dst, tensor_arg(st.a), st.act, isa::imm(st.scale), isa::imm(st.bias)));
        }
      } else if (st.kind == Step::kAlu) {
        if (st.a.kind != Arg::kImm && st.b.kind != Arg::kImm) {
          b.emit(e, isa::tensor_tensor(dst, tensor_arg(st.a), tensor_arg(st.b), st.alu));
        } else if (st.a.kind != Arg::kImm) {
          b.emit(e, isa::tensor_scalar(dst, tensor_arg(st.a), st.alu, isa::imm(st.b.imm)));
        } else if (st.b.kind != Arg::kImm) {
          Instruction in = isa::tensor_scalar(dst, tensor_arg(st.b), st.alu, isa::imm(st.a.imm));
          in.reverse0 = true;
          b.emit(e, in);
        } else {
          b.emit(e, isa::memset(dst, apply_alu_float(st.alu, st.a.imm, st.b.imm)));
        }
      } else {  // select
        if (st.a.kind == Arg::kImm) {
          const Arg& pick = st.a.imm != 0.0f ? st.b : st.c;
          if (pick.kind == Arg::kImm) b.emit(e, isa::memset(dst, pick.imm));
          else b.emit(e, isa::tensor_copy(dst, tensor_arg(pick)));
        } else if (st.b.kind == Arg::kImm) {
          // select needs a tensor on_true: materialise the constant first.
          b.emit(e, isa::memset(dst, st.b.imm));
          if (st.c.kind == Arg::kImm) b.emit(e, isa::select(dst, tensor_arg(st.a), dst, st.c.imm));
          else b.emit(e, isa::select(dst, tensor_arg(st.a), dst, tensor_arg(st.c)));
        } else if (st.c.kind == Arg::kImm) {
          b.emit(e, isa::select(dst, tensor_arg(st.a), tensor_arg(st.b), st.c.imm));
        } else {
          b.emit(e, isa::select(dst, tensor_arg(st.a), tensor_arg(st.b), tensor_arg(st.c)));
        }
      }
      done[s] = b.mark(e);
    }
    // Store; the slot is free again once the store has read it.
    b.wait(qstore, done.back());
    b.emit(qstore, isa::dma_copy(hbm_ap(out, t, t.operands.back()), buf(nbuf - 1)));
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
  for (const auto& [in, out] : pairs) es = std::max({es, dtype_size(in.dtype), dtype_size(out.dtype)});
  const uint64_t max_free = std::max<uint64_t>(1, budget / (2 * es));
  const uint64_t base = b.alloc_sbuf(2 * max_free * es);
  Token slot_free[2];
  const StreamId qload = dma_queue(0), qstore = dma_queue(1);
  uint64_t n = 0;
  for (const auto& [in, out] : pairs) {
    const auto tiles = make_tiles(out.sizes, strides_of({in, out}, out.sizes), core.sbuf.partitions, max_free);
    for (const Tile& t : tiles) {
      const int slot = static_cast<int>(n++ % 2);
      AccessPattern s = isa::sbuf(out.dtype, 0, t.partitions, base + slot * max_free * es,
                                  {{1, static_cast<uint32_t>(t.free_elements())}});
      b.wait(qload, slot_free[slot]);
      b.emit(qload, isa::dma_copy(s, hbm_ap(in, t, t.operands[0])));
      b.wait(qstore, b.mark(qload));
      b.emit(qstore, isa::dma_copy(hbm_ap(out, t, t.operands[1]), s));
      slot_free[slot] = b.mark(qstore);
    }
  }
  return std::move(b).build();
}

Program build_fill(const std::string& name, const TensorDesc& out, float value, const CoreParams& core) {
  Expr e;
  e.alu(AluOp::kBypass, Arg::constant(value), Arg::constant(0));
  return build_elementwise(name, {}, out, e, core);
}

}  // namespace neuronsim::kernels
