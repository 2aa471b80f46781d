#include "neuronsim/kernels/compiler/tile_program.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/executor.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/compiler/graph_ir.h"
#include "neuronsim/kernels/rows.h"

namespace neuronsim::kernels::compiler {

using namespace device_model;

const char* space_name(Space s) {
  switch (s) {
    case Space::kFull:
      return "full";
    case Space::kRow:
      return "row";
    case Space::kCol:
      return "col";
    case Space::kScalar:
      return "scalar";
  }
  return "?";
}

namespace {

using Kind = TileInstr::Kind;

bool produces_value(const TileInstr& in) {
  return in.kind == Kind::kLoad || in.kind == Kind::kStep || in.kind == Kind::kRowReduce ||
         in.kind == Kind::kAcc;
}

// Instructions whose values another instruction uses.
std::vector<int> uses_of(const TileInstr& in) {
  std::vector<int> u;
  if (in.kind == Kind::kStep) {
    for (const kernels::Arg* a : {&in.step.a, &in.step.b, &in.step.c}) {
      if (a->kind == kernels::Arg::kStep) u.push_back(a->index);
    }
  } else if (in.src >= 0) {
    u.push_back(in.src);
  }
  return u;
}

// Per instruction: the last instruction that uses its value (itself when unused).
std::vector<int> last_uses(const TileProgramSpec& spec) {
  std::vector<int> last(spec.instrs.size());
  for (size_t i = 0; i < spec.instrs.size(); ++i) last[i] = static_cast<int>(i);
  for (size_t i = 0; i < spec.instrs.size(); ++i) {
    for (int u : uses_of(spec.instrs[i])) {
      if (u < 0 || u >= static_cast<int>(i)) {
        throw std::invalid_argument(
            fmt::format("{}: instruction {} uses {} out of order", spec.name, i, u));
      }
      last[static_cast<size_t>(u)] = static_cast<int>(i);
    }
  }
  return last;
}

// Loads shared by every tile: scalars always, per-column rows when a tile holds whole rows.
bool hoistable(const TileInstr& in, bool cols) {
  return in.kind == Kind::kLoad &&
         (in.space == Space::kScalar || (cols && in.space == Space::kCol));
}

// Register allocation: values in the full-tile or per-row pool, reused after their last use.
struct Allocation {
  std::vector<int> reg;  // per instruction (-1: no buffer)
  int full = 0, row = 0, hoisted_col = 0, hoisted_scalar = 0;
  bool scratch = false;  // a full-width scratch tile (PSUM copies, nonzero reductions)
  int col_reduces = 0;
};

Allocation allocate(const TileProgramSpec& spec, bool hoist) {
  Allocation a;
  a.reg.assign(spec.instrs.size(), -1);
  const std::vector<int> last = last_uses(spec);
  std::vector<int> free_full, free_row;
  for (size_t i = 0; i < spec.instrs.size(); ++i) {
    const TileInstr& in = spec.instrs[i];
    if (in.kind == Kind::kColReduce) {
      ++a.col_reduces;
      if (spec.instrs.at(static_cast<size_t>(in.src)).kind == Kind::kAcc) a.scratch = true;
    }
    if (in.kind == Kind::kRowReduce && in.nonzero) a.scratch = true;
    if (in.kind == Kind::kStore && spec.instrs.at(static_cast<size_t>(in.src)).kind == Kind::kAcc)
      a.scratch = true;
    if (in.kind == Kind::kStep && in.step.kind == Step::kAlu &&
        in.step.a.kind == kernels::Arg::kStep && in.step.b.kind == kernels::Arg::kStep &&
        spec.instrs.at(static_cast<size_t>(in.step.a.index)).kind == Kind::kAcc &&
        spec.instrs.at(static_cast<size_t>(in.step.b.index)).kind == Kind::kAcc) {
      a.scratch = true;  // acc op acc: both from PSUM
    }
    if (produces_value(in) && in.kind != Kind::kAcc) {
      if (hoistable(in, hoist)) {
        a.reg[i] = in.space == Space::kCol ? a.hoisted_col++ : a.hoisted_scalar++;
      } else {
        const bool row = in.space == Space::kRow || in.space == Space::kScalar;
        auto& pool = row ? free_row : free_full;
        // A load never takes a register the tile's compute freed: the DMA would wait for that
        // compute and start a launch latency (~1.3 us) later, in the middle of the tile, and
        // hold up every later load of its in-order queue. Loads get registers of their own.
        if (!pool.empty() && in.kind != Kind::kLoad) {
          a.reg[i] = pool.back();
          pool.pop_back();
        } else {
          a.reg[i] = row ? a.row++ : a.full++;
        }
      }
    }
    // Values whose last use is here (or unused values) free their buffers now.
    std::vector<int> dying = uses_of(in);
    dying.push_back(static_cast<int>(i));
    std::sort(dying.begin(), dying.end());
    dying.erase(std::unique(dying.begin(), dying.end()), dying.end());
    for (int u : dying) {
      if (last[static_cast<size_t>(u)] != static_cast<int>(i) || a.reg[static_cast<size_t>(u)] < 0)
        continue;
      const TileInstr& ui = spec.instrs[static_cast<size_t>(u)];
      if (hoistable(ui, hoist)) continue;
      const bool row = ui.space == Space::kRow || ui.space == Space::kScalar;
      (row ? free_row : free_full).push_back(a.reg[static_cast<size_t>(u)]);
    }
  }
  return a;
}

uint64_t bytes_needed(const Allocation& a, uint64_t cols, bool hoist, uint32_t slots) {
  uint64_t b = slots * (uint64_t(a.full) * cols * 4 + uint64_t(a.row) * 4);
  if (a.scratch) b += slots * cols * 4;
  b += (hoist ? uint64_t(a.hoisted_col) * cols * 4 : 0) + uint64_t(a.hoisted_scalar) * 4;
  if (a.col_reduces) b += 4 + 512 * 4 + 64 * 4;  // ones, evacuation tile, alignment
  return b + 64 * 8;                             // alignment slack
}

}  // namespace

bool TileEmitter::has_row_reduce(const TileProgramSpec& spec) {
  return std::any_of(spec.instrs.begin(), spec.instrs.end(),
                     [](const TileInstr& in) { return in.kind == Kind::kRowReduce; });
}

bool TileEmitter::has_col_reduce(const TileProgramSpec& spec) {
  return std::any_of(spec.instrs.begin(), spec.instrs.end(),
                     [](const TileInstr& in) { return in.kind == Kind::kColReduce; });
}

uint32_t TileEmitter::max_chunk(const TileProgramSpec& spec, uint64_t sbuf_bytes, uint32_t slots) {
  const int64_t cols = spec.shape.empty() ? 1 : spec.shape.back();
  // Try the whole row (hoisting per-column operands) first, then halve.
  for (int64_t c = std::max<int64_t>(cols, 1); c >= 1; c = (c + 1) / 2) {
    const bool hoist = c >= cols;
    if (bytes_needed(allocate(spec, hoist), static_cast<uint64_t>(c), hoist, slots) <= sbuf_bytes)
      return static_cast<uint32_t>(c);
    if (c == 1) break;
  }
  return 0;
}

TileEmitter::TileEmitter(const TileProgramSpec& spec, SyncedBuilder& sb, const CoreParams& core,
                         uint32_t max_cols, uint32_t col_chunks, uint32_t load_queue_base,
                         uint32_t store_queue_base, uint32_t slots, bool transposes,
                         uint64_t hoist_chunk_budget, bool chunk_major)
    : spec_(spec),
      sb_(sb),
      core_(core),
      max_cols_(max_cols),
      chunks_(col_chunks),
      load_q_(load_queue_base),
      store_q_(store_queue_base),
      slots_(slots),
      full_off_(slots),
      row_off_(slots),
      full_buf_(slots),
      row_buf_(slots),
      scratch_off_(slots, 0),
      scratch_buf_(slots, 0),
      chunk_major_(chunk_major),
      transpose_loads_(transposes) {
  for (const TileInstr& in : spec.instrs) {
    if (in.kind == Kind::kColReduce && in.reduce != ReduceOp::kAdd) {
      throw std::invalid_argument(spec.name + ": only sums reduce over rows");
    }
    if (in.kind == Kind::kRowReduce && chunks_ > 1) {
      throw std::length_error(spec.name + ": a row reduction needs whole rows in SBUF");
    }
  }
  hoisted_ = chunks_ == 1;
  if (!hoisted_ && hoist_chunk_budget > 0) {
    // A matmul's N tiles (the chunks) each reuse their bias slice for every M tile: one copy
    // per chunk, loaded once, instead of a broadcast DMA (a descriptor per partition) per tile.
    const Allocation c = allocate(spec, true);
    if (c.hoisted_col > 0 &&
        uint64_t(c.hoisted_col) * max_cols_ * chunks_ * 4 <= hoist_chunk_budget) {
      hoisted_ = chunk_copies_ = true;
    }
  }
  const Allocation a = allocate(spec, hoisted_);
  reg_ = a.reg;
  ProgramBuilder& b = sb_.builder();
  for (uint32_t s = 0; s < slots_; ++s) {
    for (int i = 0; i < a.full; ++i) {
      full_off_[s].push_back(b.alloc_sbuf(uint64_t{max_cols_} * 4));
      full_buf_[s].push_back(sb_.buffer());
    }
    for (int i = 0; i < a.row; ++i) {
      row_off_[s].push_back(b.alloc_sbuf(4, 4));
      row_buf_[s].push_back(sb_.buffer());
    }
    if (a.scratch) {
      scratch_off_[s] = b.alloc_sbuf(uint64_t{max_cols_} * 4);
      scratch_buf_[s] = sb_.buffer();
    }
  }
  hoist_off_.assign(spec.instrs.size(), 0);
  hoist_buf_.assign(spec.instrs.size(), {});
  if (transpose_loads_) {
    for (uint32_t s = 0; s < slots_; ++s) {
      stage_off_.push_back(b.alloc_sbuf(128 * 4));
      stage_buf_.push_back(sb_.buffer());
    }
    for (int k = 0; k < 2; ++k) {
      tr_bank_[k] = b.alloc_psum_bank();
      tr_buf_[k] = sb_.buffer();
    }
  }
  for (size_t i = 0; i < spec.instrs.size(); ++i) {
    if (!hoistable(spec.instrs[i], hoisted_)) continue;
    const bool col = spec.instrs[i].space == Space::kCol;
    const uint32_t copies = col && chunk_copies_ ? chunks_ : 1;
    hoist_off_[i] = b.alloc_sbuf(col ? uint64_t{max_cols_} * 4 * copies : 4, 4);
    for (uint32_t c = 0; c < copies; ++c) hoist_buf_[i].push_back(sb_.buffer());
  }
  if (a.col_reduces) {
    ones_off_ = b.alloc_sbuf(4, 4);
    ones_buf_ = sb_.buffer();
    evac_off_ = b.alloc_sbuf(512 * 4);
    evac_buf_ = sb_.buffer();
    const uint32_t bank_cols = core.psum.bank_bytes() / 4;
    for (size_t i = 0; i < spec.instrs.size(); ++i) {
      if (spec.instrs[i].kind != Kind::kColReduce) continue;
      const Space src = spec.instrs.at(static_cast<size_t>(spec.instrs[i].src)).space;
      const uint32_t pieces = src == Space::kFull ? (max_cols_ + bank_cols - 1) / bank_cols : 1;
      for (uint32_t c = 0; c < (chunk_major_ ? 1 : chunks_); ++c) {
        for (uint32_t p = 0; p < pieces; ++p) {
          col_acc_.push_back({static_cast<int>(i), c, p, b.alloc_psum_bank(), sb_.buffer()});
        }
      }
    }
  }
}

uint32_t TileEmitter::hoist_chunk(const Tile& t) const {
  return chunk_copies_ ? static_cast<uint32_t>(t.c0 / max_cols_) : 0;
}

SyncedBuilder::Buffer TileEmitter::hoist_buf(size_t instr, const Tile& t) const {
  const auto& bufs = hoist_buf_.at(instr);
  return bufs.size() > 1 ? bufs.at(hoist_chunk(t)) : bufs.at(0);
}

AccessPattern TileEmitter::value_ap(int instr, const Tile& t, bool as_full) const {
  const TileInstr& in = spec_.instrs.at(static_cast<size_t>(instr));
  if (in.kind == Kind::kAcc) return t.acc;
  const size_t i = static_cast<size_t>(instr);
  const int s = t.slot;
  if (hoistable(in, hoisted_)) {
    if (in.space == Space::kCol)
      return isa::sbuf(DType::kFp32, 0, t.rows,
                       hoist_off_[i] + uint64_t{hoist_chunk(t)} * max_cols_ * 4, {{1, t.cols}});
    return isa::sbuf(DType::kFp32, 0, t.rows, hoist_off_[i], {{0, as_full ? t.cols : 1u}});
  }
  const bool row = in.space == Space::kRow || in.space == Space::kScalar;
  if (row) {
    return isa::sbuf(DType::kFp32, 0, t.rows, row_off_[s].at(static_cast<size_t>(reg_[i])),
                     {{0, as_full ? t.cols : 1u}});
  }
  return isa::sbuf(DType::kFp32, 0, t.rows, full_off_[s].at(static_cast<size_t>(reg_[i])),
                   {{1, t.cols}});
}

void TileEmitter::prologue() {
  const uint32_t P = core_.sbuf.partitions;
  if (!col_acc_.empty()) {
    sb_.emit(kVector, isa::memset(isa::sbuf(DType::kFp32, 0, P, ones_off_, {{1, 1}}), 1.0f), {},
             {ones_buf_});
  }
  (void)P;
}

void TileEmitter::tile(const Tile& t, uint32_t chunk) {
  tiles({{t, chunk}});
}

void TileEmitter::tiles(const std::vector<std::pair<Tile, uint32_t>>& group) {
  // Instruction by instruction across the group: independent tiles fill each other's
  // pipeline bubbles on the in-order engines.
  for (size_t ii = 0; ii < spec_.instrs.size(); ++ii) {
    for (const auto& [t, chunk] : group) emit_instr(ii, t, chunk);
  }
}

void TileEmitter::emit_instr(size_t ii, const Tile& t, uint32_t chunk) {
  // Buffers of this tile's slot and its hoisted loads.
  auto buf_of = [&](int instr) -> SyncedBuilder::Buffer {
    const TileInstr& in = spec_.instrs.at(static_cast<size_t>(instr));
    const size_t i = static_cast<size_t>(instr);
    if (in.kind == Kind::kAcc) return t.acc_buf;
    if (hoistable(in, hoisted_)) return hoist_buf(i, t);
    const bool row = in.space == Space::kRow || in.space == Space::kScalar;
    return row ? row_buf_[t.slot].at(static_cast<size_t>(reg_[i]))
               : full_buf_[t.slot].at(static_cast<size_t>(reg_[i]));
  };
  auto reads_of = [&](std::initializer_list<int> instrs) {
    std::vector<SyncedBuilder::Buffer> r;
    for (int i : instrs) {
      if (i < 0) continue;
      const SyncedBuilder::Buffer b = buf_of(i);
      if (b >= 0) r.push_back(b);
    }
    return r;
  };
  const int i = static_cast<int>(ii);
  const TileInstr& in = spec_.instrs[ii];
  switch (in.kind) {
    case Kind::kAcc:
      break;
    case Kind::kLoad: {
      const TileOperand& op = spec_.operands.at(static_cast<size_t>(in.operand));
      const StreamId q = dma_queue(static_cast<uint8_t>(load_q_ + in.operand % 4));
      if (hoistable(in, hoisted_)) {
        const bool col = in.space == Space::kCol;
        const int key = i * static_cast<int>(chunks_) + static_cast<int>(col ? hoist_chunk(t) : 0);
        if (hoist_loaded_.count(key)) break;
        // Loaded once (per chunk), for every partition: later tiles read the first rows of it.
        AccessPattern src = t.operand_ap(in.operand, col ? t.cols : 1);
        src.partitions = core_.sbuf.partitions;
        const uint64_t off = hoist_off_[ii] + (col ? uint64_t{hoist_chunk(t)} * max_cols_ * 4 : 0);
        AccessPattern dst =
            isa::sbuf(DType::kFp32, 0, src.partitions, off, {{1, col ? t.cols : 1u}});
        sb_.emit(q, isa::dma_copy(dst, src), {}, {hoist_buf(ii, t)});
        hoist_loaded_.insert(key);
        break;
      }
      const bool row = in.space == Space::kRow || in.space == Space::kScalar;
      AccessPattern dst = value_ap(i, t, false);
      const AccessPattern src = t.operand_ap(in.operand, row ? 1 : t.cols);
      if (!row && row_contiguous(src, t)) {
        // Its contiguous dim runs along the tile's rows: load contiguous runs and transpose
        // them on TensorE.
        const AccessPattern stage =
            isa::sbuf(op.dtype, 0, t.cols, stage_off_[t.slot], {{1, t.rows}});
        sb_.emit(q, isa::dma_copy(stage, natural(src, t)), {}, {stage_buf_[t.slot]});
        const int tb = static_cast<int>(transposes_++ % 2);
        const AccessPattern ps = isa::psum_tile(op.dtype, t.rows, tr_bank_[tb], t.cols);
        sb_.emit(kTensor, isa::transpose(ps, stage), {stage_buf_[t.slot]}, {tr_buf_[tb]});
        sb_.emit(kVector, isa::tensor_copy(dst, ps), {tr_buf_[tb]}, {buf_of(i)});
        break;
      }
      sb_.emit(q, isa::dma_copy(dst, src), {}, {buf_of(i)});
      break;
    }
    case Kind::kStep:
      emit_step(i, t);
      break;
    case Kind::kRowReduce: {
      const TileInstr& src = spec_.instrs.at(static_cast<size_t>(in.src));
      const AccessPattern dst = value_ap(i, t, false);
      AccessPattern from = value_ap(in.src, t, false);
      std::vector<SyncedBuilder::Buffer> reads = reads_of({in.src});
      if (in.nonzero) {
        const AccessPattern tmp = isa::sbuf(DType::kFp32, 0, t.rows, scratch_off_[t.slot],
                                            {{1, from.free_elements() == 1 ? 1u : t.cols}});
        sb_.emit(kVector, isa::tensor_scalar(tmp, from, AluOp::kNotEqual, isa::imm(0.0f)), reads,
                 {scratch_buf_[t.slot]});
        from = tmp;
        reads = {scratch_buf_[t.slot]};
      }
      if (src.space == Space::kFull) {
        sb_.emit(kVector, isa::tensor_reduce(dst, from, in.reduce), reads, {buf_of(i)});
      } else {
        sb_.emit(kVector, isa::tensor_copy(dst, from), reads, {buf_of(i)});
      }
      if (in.scale != 1.0f) {
        sb_.emit(kVector, isa::tensor_scalar(dst, dst, AluOp::kMultiply, isa::imm(in.scale)),
                 {buf_of(i)}, {buf_of(i)});
      }
      break;
    }
    case Kind::kColReduce: {
      const TileInstr& src = spec_.instrs.at(static_cast<size_t>(in.src));
      AccessPattern from = value_ap(in.src, t, false);
      std::vector<SyncedBuilder::Buffer> reads = reads_of({in.src});
      if (src.kind == Kind::kAcc) {  // TensorE reads SBUF only
        const AccessPattern tmp =
            isa::sbuf(DType::kFp32, 0, t.rows, scratch_off_[t.slot], {{1, t.cols}});
        sb_.emit(kVector, isa::tensor_copy(tmp, from), reads, {scratch_buf_[t.slot]});
        from = tmp;
        reads = {scratch_buf_[t.slot]};
      }
      const AccessPattern ones = isa::sbuf(DType::kFp32, 0, t.rows, ones_off_, {{1, 1}});
      reads.push_back(ones_buf_);
      for (ColAcc& acc : col_acc_) {
        if (acc.instr != i || acc.chunk != (chunk_major_ ? 0 : chunk)) continue;
        const uint32_t c0 = acc.piece * 512;
        if (c0 >= from.free_elements()) continue;
        const uint32_t w =
            std::min<uint32_t>(512, static_cast<uint32_t>(from.free_elements()) - c0);
        AccessPattern mv = from;
        mv.offset += uint64_t{c0} * 4;
        mv.dims[0].size = w;
        const AccessPattern ps = isa::psum_tile(DType::kFp32, 1, acc.bank, w);
        sb_.emit(kTensor, isa::matmul(ps, ones, mv, !t.first), reads, {acc.buf});
      }
      break;
    }
    case Kind::kStore: {
      const TileInstr& src = spec_.instrs.at(static_cast<size_t>(in.src));
      const bool row = src.space == Space::kRow || src.space == Space::kScalar;
      AccessPattern from = value_ap(in.src, t, false);
      std::vector<SyncedBuilder::Buffer> reads = reads_of({in.src});
      if (src.kind == Kind::kAcc) {  // DMA moves SBUF, not PSUM
        const AccessPattern tmp =
            isa::sbuf(DType::kFp32, 0, t.rows, scratch_off_[t.slot], {{1, t.cols}});
        sb_.emit(kVector, isa::tensor_copy(tmp, from), reads, {scratch_buf_[t.slot]});
        from = tmp;
        reads = {scratch_buf_[t.slot]};
      }
      const StreamId q = dma_queue(static_cast<uint8_t>(store_q_ + in.operand % 2));
      const AccessPattern dst = t.operand_ap(in.operand, row ? 1 : t.cols);
      if (!row && row_contiguous(dst, t)) {
        // The output's contiguous dim runs along the tile's rows: transpose on TensorE and
        // store contiguous runs (a strided store would move one element per descriptor).
        const int tb = static_cast<int>(transposes_++ % 2);
        const AccessPattern ps = isa::psum_tile(DType::kFp32, t.cols, tr_bank_[tb], t.rows);
        sb_.emit(kTensor, isa::transpose(ps, from), reads, {tr_buf_[tb]});
        const AccessPattern stage =
            isa::sbuf(DType::kFp32, 0, t.cols, stage_off_[t.slot], {{1, t.rows}});
        sb_.emit(kVector, isa::tensor_copy(stage, ps), {tr_buf_[tb]}, {stage_buf_[t.slot]});
        sb_.emit(q, isa::dma_copy(natural(dst, t), stage), {stage_buf_[t.slot]}, {});
        break;
      }
      sb_.emit(q, isa::dma_copy(dst, from), reads, {});
      break;
    }
  }
}

bool TileEmitter::row_contiguous(const AccessPattern& ap, const Tile& t) const {
  return transpose_loads_ && ap.partition_stride == 1 && ap.ndims == 1 && ap.dims[0].stride != 1 &&
         ap.dims[0].stride != 0 && t.rows > 1 && t.rows <= 128 && t.cols <= 128;
}

AccessPattern TileEmitter::natural(const AccessPattern& ap, const Tile& t) {
  // The same elements seen the other way: columns on partitions, rows contiguous.
  AccessPattern n = ap;
  n.partitions = t.cols;
  n.partition_stride = ap.dims[0].stride;
  n.dims[0] = {1, t.rows};
  return n;
}

void TileEmitter::emit_step(int i, const Tile& t) {
  const TileInstr& in = spec_.instrs.at(static_cast<size_t>(i));
  const Step& st = in.step;
  const bool full = in.space == Space::kFull || in.space == Space::kCol;
  const AccessPattern dst = value_ap(i, t, false);
  const SyncedBuilder::Buffer dbuf = [&] {
    const size_t ii = static_cast<size_t>(i);
    const bool row = in.space == Space::kRow || in.space == Space::kScalar;
    return row ? row_buf_[t.slot].at(static_cast<size_t>(reg_[ii]))
               : full_buf_[t.slot].at(static_cast<size_t>(reg_[ii]));
  }();
  auto space_of = [&](const kernels::Arg& a) {
    return spec_.instrs.at(static_cast<size_t>(a.index)).space;
  };
  auto is_row = [&](const kernels::Arg& a) {
    return a.kind == kernels::Arg::kStep &&
           (space_of(a) == Space::kRow || space_of(a) == Space::kScalar);
  };
  auto ap = [&](const kernels::Arg& a) { return value_ap(a.index, t, full); };
  auto buf = [&](const kernels::Arg& a) -> std::vector<SyncedBuilder::Buffer> {
    if (a.kind != kernels::Arg::kStep) return {};
    const TileInstr& src = spec_.instrs.at(static_cast<size_t>(a.index));
    if (src.kind == Kind::kAcc) {
      return t.acc_buf >= 0 ? std::vector<SyncedBuilder::Buffer>{t.acc_buf}
                            : std::vector<SyncedBuilder::Buffer>{};
    }
    const size_t si = static_cast<size_t>(a.index);
    if (hoistable(src, hoisted_)) return {hoist_buf(si, t)};
    const bool row = src.space == Space::kRow || src.space == Space::kScalar;
    return {row ? row_buf_[t.slot].at(static_cast<size_t>(reg_[si]))
                : full_buf_[t.slot].at(static_cast<size_t>(reg_[si]))};
  };
  auto cat = [](std::vector<SyncedBuilder::Buffer> a, const std::vector<SyncedBuilder::Buffer>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  using A = kernels::Arg;
  if (st.kind == Step::kAct) {
    if (st.a.kind == A::kImm) {
      sb_.emit(kVector, isa::memset(dst, apply_activation(st.act, st.a.imm * st.scale + st.bias)),
               {}, {dbuf});
    } else {
      scalar_ns_ +=
          std::max<double>(static_cast<double>(dst.free_elements()), core_.scalar.min_ii_cycles) /
          core_.scalar.frequency_hz * 1e9;
      sb_.emit(kScalar,
               isa::activation(dst, ap(st.a), st.act, isa::imm(st.scale), isa::imm(st.bias)),
               buf(st.a), {dbuf});
    }
    return;
  }
  if (st.kind == Step::kAlu) {
    if (st.a.kind == A::kImm && st.b.kind == A::kImm) {
      sb_.emit(kVector, isa::memset(dst, apply_alu_float(st.alu, st.a.imm, st.b.imm)), {}, {dbuf});
    } else if (st.a.kind == A::kImm || st.b.kind == A::kImm) {
      const bool imm_first = st.a.kind == A::kImm;
      const A& tensor = imm_first ? st.b : st.a;
      const float imm = imm_first ? st.a.imm : st.b.imm;
      // An affine step (x * c, x + c, x - c, c - x) also runs on ScalarE as copy(x * s + b):
      // give it to whichever engine has less work so far.
      float scale = 1.0f, bias = 0.0f;
      bool affine = true;
      switch (st.alu) {
        case AluOp::kMultiply:
          scale = imm;
          break;
        case AluOp::kAdd:
          bias = imm;
          break;
        case AluOp::kSubtract:
          scale = imm_first ? -1.0f : 1.0f;
          bias = imm_first ? imm : -imm;
          break;
        case AluOp::kBypass:
          affine = !imm_first;
          break;
        default:
          affine = false;
      }
      const double n = static_cast<double>(dst.free_elements());
      const double vec_ns =
          std::max<double>(n, core_.vector.min_ii_cycles) / core_.vector.frequency_hz * 1e9;
      const double act_ns =
          std::max<double>(n, core_.scalar.min_ii_cycles) / core_.scalar.frequency_hz * 1e9;
      if (affine && scalar_ns_ + act_ns < vector_ns_ + vec_ns) {
        scalar_ns_ += act_ns;
        sb_.emit(kScalar,
                 isa::activation(dst, ap(tensor), ActFunc::kCopy, isa::imm(scale), isa::imm(bias)),
                 buf(tensor), {dbuf});
      } else {
        vector_ns_ += vec_ns;
        Instruction x = isa::tensor_scalar(dst, ap(tensor), st.alu, isa::imm(imm));
        x.reverse0 = imm_first;
        sb_.emit(kVector, x, buf(tensor), {dbuf});
      }
    } else if (full && is_row(st.b) != is_row(st.a)) {
      // A per-row operand is the per-partition scalar of tensor_scalar.
      const bool row_first = is_row(st.a);
      const A& tensor = row_first ? st.b : st.a;
      const A& row = row_first ? st.a : st.b;
      const AccessPattern r = value_ap(row.index, t, false);
      // x * r, x + r and r - x are also ScalarE's copy(x * scale + bias) with a per-partition
      // scale or bias: a normalisation's chain then runs on both engines.
      const double n = static_cast<double>(dst.free_elements());
      const double vec_ns =
          std::max<double>(n, core_.vector.min_ii_cycles) / core_.vector.frequency_hz * 1e9;
      const double act_ns =
          std::max<double>(n, core_.scalar.min_ii_cycles) / core_.scalar.frequency_hz * 1e9;
      const bool on_scalar = (st.alu == AluOp::kMultiply || st.alu == AluOp::kAdd ||
                              (st.alu == AluOp::kSubtract && row_first)) &&
                             scalar_ns_ + act_ns < vector_ns_ + vec_ns;
      if (on_scalar) {
        scalar_ns_ += act_ns;
        const ScalarOperand scale = st.alu == AluOp::kMultiply
                                        ? isa::per_partition(r)
                                        : isa::imm(st.alu == AluOp::kSubtract ? -1.0f : 1.0f);
        const ScalarOperand bias =
            st.alu == AluOp::kMultiply ? isa::imm(0.0f) : isa::per_partition(r);
        sb_.emit(kScalar, isa::activation(dst, ap(tensor), ActFunc::kCopy, scale, bias),
                 cat(buf(tensor), buf(row)), {dbuf});
      } else {
        vector_ns_ += vec_ns;
        Instruction x = isa::tensor_scalar(dst, ap(tensor), st.alu, isa::per_partition(r));
        x.reverse0 = row_first;
        sb_.emit(kVector, x, cat(buf(tensor), buf(row)), {dbuf});
      }
    } else if (full && st.alu == AluOp::kMultiply && st.a.kind == A::kStep &&
               st.b.kind == A::kStep && st.a.index == st.b.index && !is_row(st.a) && [&] {
                 const double n = static_cast<double>(dst.free_elements());
                 return scalar_ns_ + std::max<double>(n, core_.scalar.min_ii_cycles) /
                                         core_.scalar.frequency_hz * 1e9 <
                        vector_ns_ + 2.0 * std::max<double>(n, core_.vector.min_ii_cycles) /
                                         core_.vector.frequency_hz * 1e9;
               }()) {
      // x * x is ScalarE's square (a tensor_tensor pass on VectorE costs two).
      scalar_ns_ +=
          std::max<double>(static_cast<double>(dst.free_elements()), core_.scalar.min_ii_cycles) /
          core_.scalar.frequency_hz * 1e9;
      sb_.emit(kScalar,
               isa::activation(dst, ap(st.a), ActFunc::kSquare, isa::imm(1.0f), isa::imm(0.0f)),
               buf(st.a), {dbuf});
    } else {
      AccessPattern a = ap(st.a), b = ap(st.b);
      std::vector<SyncedBuilder::Buffer> reads = cat(buf(st.a), buf(st.b));
      if (a.space == MemSpace::kPsum && b.space == MemSpace::kPsum) {
        const AccessPattern tmp =
            isa::sbuf(DType::kFp32, 0, t.rows, scratch_off_[t.slot], {{1, t.cols}});
        sb_.emit(kVector, isa::tensor_copy(tmp, b), buf(st.b), {scratch_buf_[t.slot]});
        b = tmp;
        reads.push_back(scratch_buf_[t.slot]);
      }
      vector_ns_ +=
          2.0 *
          std::max<double>(static_cast<double>(dst.free_elements()), core_.vector.min_ii_cycles) /
          core_.vector.frequency_hz * 1e9;
      sb_.emit(kVector, isa::tensor_tensor(dst, a, b, st.alu), reads, {dbuf});
    }
    return;
  }
  // select: a != 0 ? b : c
  if (st.a.kind == A::kImm) {
    const A& pick = st.a.imm != 0.0f ? st.b : st.c;
    if (pick.kind == A::kImm) {
      sb_.emit(kVector, isa::memset(dst, pick.imm), {}, {dbuf});
    } else {
      sb_.emit(kVector, isa::tensor_copy(dst, ap(pick)), buf(pick), {dbuf});
    }
    return;
  }
  AccessPattern on_true = dst;
  std::vector<SyncedBuilder::Buffer> reads = buf(st.a);
  if (st.b.kind == A::kImm) {
    sb_.emit(kVector, isa::memset(dst, st.b.imm), {}, {dbuf});
    reads.push_back(dbuf);
  } else {
    on_true = ap(st.b);
    reads = cat(reads, buf(st.b));
  }
  if (st.c.kind == A::kImm) {
    sb_.emit(kVector, isa::select(dst, ap(st.a), on_true, st.c.imm), reads, {dbuf});
  } else {
    sb_.emit(kVector, isa::select(dst, ap(st.a), on_true, ap(st.c)), cat(reads, buf(st.c)), {dbuf});
  }
}

void TileEmitter::epilogue(const std::function<AccessPattern(int, uint32_t)>& chunk_ap) {
  if (chunk_major_) return;  // flushed chunk by chunk
  for (const ColAcc& acc : col_acc_) flush_acc(acc, acc.chunk, chunk_ap);
}

void TileEmitter::flush(uint32_t chunk,
                        const std::function<AccessPattern(int, uint32_t)>& chunk_ap) {
  for (const ColAcc& acc : col_acc_) flush_acc(acc, chunk, chunk_ap);
}

void TileEmitter::flush_acc(const ColAcc& acc, uint32_t chunk,
                            const std::function<AccessPattern(int, uint32_t)>& chunk_ap) {
  const TileInstr& in = spec_.instrs.at(static_cast<size_t>(acc.instr));
  AccessPattern out = chunk_ap(in.operand, chunk);
  const uint32_t total = static_cast<uint32_t>(out.free_elements());
  const uint32_t c0 = acc.piece * 512;
  if (c0 >= total) return;
  const uint32_t w = std::min<uint32_t>(512, total - c0);
  out = isa::slice(out, c0, w);
  const AccessPattern ps = isa::psum_tile(DType::kFp32, 1, acc.bank, w);
  const AccessPattern ev = isa::sbuf(DType::kFp32, 0, 1, evac_off_, {{1, w}});
  sb_.emit(kVector, isa::tensor_scalar(ev, ps, AluOp::kMultiply, isa::imm(in.scale)), {acc.buf},
           {evac_buf_});
  const StreamId q = dma_queue(static_cast<uint8_t>(store_q_ + in.operand % 2));
  sb_.emit(q, isa::dma_copy(out, ev), {evac_buf_}, {});
}

uint32_t TileEmitter::col_reduce_banks(const TileProgramSpec& spec, uint32_t max_cols,
                                       uint32_t chunks, const CoreParams& core) {
  const uint32_t bank_cols = static_cast<uint32_t>(core.psum.bank_bytes() / 4);
  uint32_t banks = 0;
  for (const TileInstr& in : spec.instrs) {
    if (in.kind != Kind::kColReduce) continue;
    const bool full = spec.instrs.at(static_cast<size_t>(in.src)).space == Space::kFull;
    banks += chunks * (full ? (max_cols + bank_cols - 1) / bank_cols : 1);
  }
  return banks;
}

namespace {

// A region of elementwise steps over contiguous tensors only is one flat range: it tiles as
// [128, n / 128] however the tensors are shaped, so each DMA moves long rows.
std::optional<TileProgramSpec> flattened(const TileProgramSpec& spec, uint32_t partitions) {
  int64_t n = 1;
  for (int64_t s : spec.shape) n *= s;
  if (n % partitions != 0) return std::nullopt;
  const std::vector<int64_t> cs = contiguous_strides(spec.shape);
  for (const TileInstr& in : spec.instrs) {
    if (in.kind == Kind::kRowReduce || in.kind == Kind::kColReduce || in.kind == Kind::kAcc)
      return std::nullopt;
    if (in.space != Space::kFull && in.space != Space::kScalar) return std::nullopt;
  }
  TileProgramSpec f = spec;
  f.shape = {partitions, n / partitions};
  for (TileOperand& o : f.operands) {
    bool zero = true, contiguous = true;
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      if (spec.shape[d] == 1) continue;
      zero &= o.strides[d] == 0;
      contiguous &= o.strides[d] == cs[d];
    }
    if (o.space == Space::kScalar && zero) {
      o.strides = {0, 0};
    } else if (o.space == Space::kFull && contiguous) {
      o.strides = {n / partitions, 1};
    } else {
      return std::nullopt;
    }
  }
  return f;
}

// Rows may be walked in any dim order (every operand sees the same order): when the
// innermost row dims are small in some operand's layout (a permuted input), putting the largest
// row dim innermost gives fuller tiles.
RowLayout layout_of(const TileProgramSpec& spec, const std::vector<std::vector<int64_t>>& strides,
                    const CoreParams& core) {
  RowLayout l = row_layout(spec.shape, strides, -1, core.sbuf.partitions);
  if (spec.shape.size() > 2) {
    std::vector<size_t> order(spec.shape.size() - 1);
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return spec.shape[a] < spec.shape[b]; });
    order.push_back(spec.shape.size() - 1);
    std::vector<int64_t> shape;
    for (size_t d : order) shape.push_back(spec.shape[d]);
    std::vector<std::vector<int64_t>> st(strides.size());
    for (size_t k = 0; k < strides.size(); ++k) {
      for (size_t d : order) st[k].push_back(strides[k][d]);
    }
    RowLayout alt = row_layout(shape, st, -1, core.sbuf.partitions);
    if (alt.tiles.size() < l.tiles.size()) l = std::move(alt);
  }
  return l;
}

// An operand whose contiguous dim runs along the rows is transposed on TensorE, 128 x 128 at a
// time (a strided DMA would move one element per descriptor).
bool has_transposed_operand(const TileProgramSpec& spec, const RowLayout& l) {
  if (l.tiles.empty() || l.tiles[0].rows <= 1) return false;
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    if (l.tiles[0].row_stride[k] == 1 && l.col_stride[k] != 1 && l.col_stride[k] != 0 &&
        spec.operands[k].space == Space::kFull) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool tile_program_transposes(const TileProgramSpec& spec, const CoreParams& core) {
  if (flattened(spec, core.sbuf.partitions)) return false;
  std::vector<std::vector<int64_t>> strides;
  for (const TileOperand& op : spec.operands) strides.push_back(op.strides);
  return has_transposed_operand(spec, layout_of(spec, strides, core));
}

bool tile_program_is_flat(const TileProgramSpec& spec, const CoreParams& core) {
  return flattened(spec, core.sbuf.partitions).has_value();
}

device_model::Program build_tile_program(const TileProgramSpec& original, const CoreParams& core) {
  if (original.shape.empty()) throw std::invalid_argument(original.name + ": empty tile space");
  for (int64_t s : original.shape) {
    if (s == 0) return Program{original.name, {}, {}, {}};
  }
  const auto flat = flattened(original, core.sbuf.partitions);
  const TileProgramSpec& spec = flat ? *flat : original;
  const int64_t cols = spec.shape.back();
  std::vector<std::vector<int64_t>> strides;
  std::vector<TensorDesc> descs;
  for (const TileOperand& op : spec.operands) {
    if (op.strides.size() != spec.shape.size()) {
      throw std::invalid_argument(fmt::format("{}: operand of value {} has {} strides for {} dims",
                                              spec.name, op.value, op.strides.size(),
                                              spec.shape.size()));
    }
    strides.push_back(op.strides);
    descs.push_back(TensorDesc{op.address, op.dtype, spec.shape, op.strides});
  }
  RowLayout l = layout_of(spec, strides, core);
  uint32_t chunk = TileEmitter::max_chunk(spec, core.sbuf.partition_bytes);
  if (chunk == 0) {
    throw std::length_error(fmt::format("{}: its values do not fit SBUF", spec.name));
  }
  // A few tiles at least (of 512 columns or more) so loads, compute and stores overlap.
  if (!TileEmitter::has_row_reduce(spec) && l.tiles.size() < 4) {
    const int64_t want = (4 + static_cast<int64_t>(l.tiles.size()) - 1) /
                         static_cast<int64_t>(std::max<size_t>(l.tiles.size(), 1));
    const int64_t split = std::max<int64_t>(512, (cols + want - 1) / want);
    chunk = static_cast<uint32_t>(std::min<int64_t>(chunk, split));
  }
  const bool transposes = has_transposed_operand(spec, l);
  if (transposes) chunk = std::min<uint32_t>(chunk, 128);
  const uint32_t chunks = static_cast<uint32_t>((cols + chunk - 1) / chunk);
  // Tiles are emitted in interleaved pairs. A load that waits for its slot to be free starts
  // a DMA launch latency (~1.3 us) after that: small tiles need many slots in flight to hide
  // it, so a region takes the most slots (up to 16, no more than its tiles) that fit.
  const uint64_t tiles_total = l.tiles.size() * chunks;
  uint32_t slots = 2;
  for (uint32_t s = 16; s >= 4; s /= 2) {
    if (tiles_total > s / 2 &&
        TileEmitter::max_chunk(spec, core.sbuf.partition_bytes, s) >= chunk) {
      slots = s;
      break;
    }
  }
  // Reductions over rows keep a PSUM bank per 512 columns of each chunk until the last row
  // tile; when all chunks' banks do not fit, the tiles go chunk by chunk and the chunks share
  // one chunk's banks.
  const uint32_t banks = core.psum.banks - (transposes ? 2 : 0);
  const bool chunk_major =
      chunks > 1 && TileEmitter::col_reduce_banks(spec, chunk, chunks, core) > banks;
  ProgramBuilder b(spec.name, core);
  SyncedBuilder sb(b);
  TileEmitter em(spec, sb, core, chunk, chunks, 0, 8, slots, transposes, 0, chunk_major);
  em.prologue();
  auto chunk_ap = [&](int k, uint32_t c) {
    // One row of the chunk's columns: element 0 of the output plus the chunk offset.
    RowTile first;
    first.rows = 1;
    first.offset.assign(descs.size(), 0);
    first.row_stride.assign(descs.size(), 0);
    const int64_t c0 = int64_t{c} * chunk;
    const uint32_t w = static_cast<uint32_t>(std::min<int64_t>(chunk, cols - c0));
    const TileOperand& op = spec.operands.at(static_cast<size_t>(k));
    return row_ap(descs.at(static_cast<size_t>(k)), l, first, static_cast<size_t>(k), c0,
                  op.space == Space::kCol ? w : 1);
  };
  uint64_t n = 0;
  std::vector<std::pair<TileEmitter::Tile, uint32_t>> group;  // two tiles, one per slot
  const size_t outer = chunk_major ? chunks : l.tiles.size();
  const size_t inner = chunk_major ? l.tiles.size() : chunks;
  for (size_t o = 0; o < outer; ++o) {
    for (size_t in = 0; in < inner; ++in) {
      const size_t ti = chunk_major ? in : o;
      const uint32_t c = static_cast<uint32_t>(chunk_major ? o : in);
      const RowTile rt = l.tiles[ti];
      TileEmitter::Tile t;
      t.rows = rt.rows;
      t.c0 = int64_t{c} * chunk;
      t.cols = static_cast<uint32_t>(std::min<int64_t>(chunk, cols - t.c0));
      t.slot = static_cast<int>(n++ % slots);
      t.first = ti == 0;
      const int64_t c0 = t.c0;
      t.operand_ap = [&descs, &l, rt, c0](int k, uint32_t count) {
        return row_ap(descs.at(static_cast<size_t>(k)), l, rt, static_cast<size_t>(k), c0, count);
      };
      // Tiles of one column chunk accumulate reductions over rows in order: flush first.
      if (!group.empty() && group.back().second != c && TileEmitter::has_col_reduce(spec)) {
        em.tiles(group);
        group.clear();
      }
      group.emplace_back(std::move(t), c);
      if (group.size() == 2) {
        em.tiles(group);
        group.clear();
      }
    }
    if (chunk_major) {  // the chunk's sums leave its banks for the next chunk
      if (!group.empty()) em.tiles(group);
      group.clear();
      em.flush(static_cast<uint32_t>(o), chunk_ap);
    }
  }
  if (!group.empty()) em.tiles(group);
  em.epilogue(chunk_ap);
  return std::move(b).build();
}

}  // namespace neuronsim::kernels::compiler

namespace neuronsim::kernels::compiler {

bool same_structure(const TileProgramSpec& a, const TileProgramSpec& b) {
  if (a.instrs.size() != b.instrs.size() || a.operands.size() != b.operands.size()) return false;
  for (size_t k = 0; k < a.operands.size(); ++k) {
    if (a.operands[k].space != b.operands[k].space || a.operands[k].dtype != b.operands[k].dtype)
      return false;
  }
  auto same_arg = [](const kernels::Arg& x, const kernels::Arg& y) {
    return x.kind == y.kind && x.index == y.index &&
           (x.kind != kernels::Arg::kImm || x.imm == y.imm);
  };
  for (size_t i = 0; i < a.instrs.size(); ++i) {
    const TileInstr &x = a.instrs[i], &y = b.instrs[i];
    if (x.kind != y.kind || x.space != y.space || x.operand != y.operand || x.src != y.src ||
        x.reduce != y.reduce || x.scale != y.scale || x.nonzero != y.nonzero)
      return false;
    if (x.kind == TileInstr::Kind::kStep) {
      const Step &p = x.step, &q = y.step;
      if (p.kind != q.kind || p.alu != q.alu || p.act != q.act || p.scale != q.scale ||
          p.bias != q.bias || !same_arg(p.a, q.a) || !same_arg(p.b, q.b) || !same_arg(p.c, q.c))
        return false;
    }
  }
  return true;
}

std::vector<TileProgramSpec> flatten_group(const std::string& name,
                                           const std::vector<TileProgramSpec>& specs,
                                           const CoreParams& core) {
  if (specs.empty()) throw std::invalid_argument(name + ": empty group");
  std::vector<TileProgramSpec> flat;
  for (const TileProgramSpec& s : specs) {
    auto f = flattened(s, core.sbuf.partitions);
    if (!f || !same_structure(*f, flat.empty() ? *f : flat[0])) {
      throw std::invalid_argument(name + ": group members must be flat and alike");
    }
    flat.push_back(std::move(*f));
  }
  return flat;
}

device_model::Program build_tile_program_group(const std::string& name,
                                               const std::vector<TileProgramSpec>& flat,
                                               const CoreParams& core) {
  if (flat.empty()) throw std::invalid_argument(name + ": empty group");
  const TileProgramSpec& first = flat[0];
  // The chunk is sized for the widest member: sized for the first (often a 256-element norm
  // weight, two columns wide) it would cut every large parameter into two-column tiles.
  const TileProgramSpec& widest = *std::max_element(
      flat.begin(), flat.end(), [](const TileProgramSpec& a, const TileProgramSpec& b) {
        return a.shape.back() < b.shape.back();
      });
  uint32_t chunk =
      std::min<uint32_t>(TileEmitter::max_chunk(widest, core.sbuf.partition_bytes, 4), 2048);
  if (chunk == 0) throw std::length_error(name + ": its values do not fit SBUF");
  ProgramBuilder b(name, core);
  SyncedBuilder sb(b);
  // More than one chunk overall: nothing is hoisted across members but scalars, which are
  // reloaded for each member (each has its own).
  TileEmitter em(first, sb, core, chunk, 2, 0, 8, 4);
  em.prologue();
  uint64_t n = 0;
  std::vector<std::pair<TileEmitter::Tile, uint32_t>> group;
  for (const TileProgramSpec& m : flat) {
    em.reset_hoisted();
    std::vector<TensorDesc> descs;
    std::vector<std::vector<int64_t>> strides;
    for (const TileOperand& op : m.operands) {
      strides.push_back(op.strides);
      descs.push_back(TensorDesc{op.address, op.dtype, m.shape, op.strides});
    }
    auto layout =
        std::make_shared<RowLayout>(row_layout(m.shape, strides, -1, core.sbuf.partitions));
    auto member_descs = std::make_shared<std::vector<TensorDesc>>(std::move(descs));
    const int64_t cols = m.shape.back();
    for (const RowTile& rt : layout->tiles) {
      for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
        TileEmitter::Tile t;
        t.rows = rt.rows;
        t.c0 = c0;
        t.cols = static_cast<uint32_t>(std::min<int64_t>(chunk, cols - c0));
        t.slot = static_cast<int>(n++ % 4);
        t.operand_ap = [member_descs, layout, rt, c0](int k, uint32_t count) {
          return row_ap(member_descs->at(static_cast<size_t>(k)), *layout, rt,
                        static_cast<size_t>(k), c0, count);
        };
        group.emplace_back(std::move(t), 0);
        if (group.size() == 2) {
          em.tiles(group);
          group.clear();
        }
      }
    }
    if (!group.empty()) {  // scalars are reloaded for the next member: finish this one's pair
      em.tiles(group);
      group.clear();
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels::compiler
