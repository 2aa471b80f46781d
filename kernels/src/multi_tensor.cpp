#include "neuronsim/kernels/multi_tensor.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/executor.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/reduction.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

MtArg push(MtExpr& e, const MtStep& s) {
  e.steps.push_back(s);
  return {MtArg::kStep, static_cast<int>(e.steps.size()) - 1, 0.0f};
}

}  // namespace

MtArg MtExpr::alu(AluOp op, MtArg a, MtArg b) {
  return push(*this, {.kind = MtStep::kAlu, .alu = op, .a = a, .b = b});
}

MtArg MtExpr::act(ActFunc f, MtArg a, float scale, float bias) {
  return push(*this, {.kind = MtStep::kAct, .act = f, .scale = scale, .bias = bias, .a = a});
}

MtArg MtExpr::select(MtArg pred, MtArg on_true, MtArg on_false) {
  return push(*this, {.kind = MtStep::kSelect, .a = pred, .b = on_true, .c = on_false});
}

MtArg MtExpr::broadcast(MtArg scalar_value) {
  return push(*this, {.kind = MtStep::kBroadcast, .a = scalar_value});
}

MtArg MtExpr::reduce(MtArg value, ReduceOp op, bool across_groups) {
  reductions.push_back({value, op, across_groups});
  return {MtArg::kReduced, static_cast<int>(reductions.size()) - 1, 0.0f};
}

namespace {

// Where a value lives: a per-group constant (folded on the host, as kernel arguments are), a
// [P, 1] column computed once per group, per element (tiles), or after a reduction ([1, 1]).
enum Phase { kConst, kColumn, kTile, kPost };

float identity(ReduceOp r) {
  switch (r) {
    case ReduceOp::kAdd:
      return 0.0f;
    case ReduceOp::kMax:
      return -std::numeric_limits<float>::infinity();
    case ReduceOp::kMin:
      return std::numeric_limits<float>::infinity();
    case ReduceOp::kMultiply:
      return 1.0f;
  }
  return 0.0f;
}

// An instruction operand: an AP of the destination's shape ("full"), a per-partition column, or
// an immediate.
struct Operand {
  enum Kind { kFull, kColumn, kImm } kind = kImm;
  AccessPattern ap{};
  float imm = 0.0f;
};

// The expression analysed once: each step's phase and buffer, the tensors it reads.
struct Plan {
  std::vector<Phase> phase;         // per step
  std::vector<int> slot;            // per step: buffer index within its phase's buffers
  std::vector<bool> global;         // per step: reads an across-groups reduction
  std::vector<Phase> reduction_in;  // per reduction: phase of its value (must be kTile)
  std::set<int> tensors;            // tensor operands read
  int tile_steps = 0, column_steps = 0, post_steps = 0;
  // Per-element ALU steps with a scalar operand whose only reader is another such step run as
  // one two-operator tensor_scalar: fused_into[k] = the reader, fused_from[reader] = k.
  std::vector<int> fused_into, fused_from;
};

class MultiTensorBuilder {
 public:
  MultiTensorBuilder(const std::string& name, const std::vector<MtGroup>& groups,
                     const MtExpr& expr, const CoreParams& core)
      : b_(name, core), groups_(groups), e_(expr), core_(core) {
    cdt_ = expr.integer ? DType::kInt32 : DType::kFp32;
    analyse();
  }

  Program build() && {
    allocate();
    init_global_accumulators();
    for (size_t g = 0; g < groups_.size(); ++g) run_group(g);
    finish_global();
    return std::move(b_).build();
  }

 private:
  static constexpr int kScratch = 3;  // materialised operands: two for VectorE, one for ScalarE

  Phase phase_of(const MtArg& a) const {
    switch (a.kind) {
      case MtArg::kTensor:
        return kTile;
      case MtArg::kScalar:
        return kColumn;
      case MtArg::kReduced:
        return kPost;
      case MtArg::kStep:
        return plan_.phase.at(static_cast<size_t>(a.index));
      default:
        return kConst;
    }
  }

  bool global_of(const MtArg& a) const {
    if (a.kind == MtArg::kReduced)
      return e_.reductions.at(static_cast<size_t>(a.index)).across_groups;
    if (a.kind == MtArg::kStep) return plan_.global.at(static_cast<size_t>(a.index));
    return false;
  }

  void note_tensor(const MtArg& a) {
    if (a.kind == MtArg::kTensor) plan_.tensors.insert(a.index);
  }

  void analyse() {
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      const MtReduction& red = e_.reductions[r];
      if (red.value.kind == MtArg::kStep && static_cast<size_t>(red.value.index) >= e_.steps.size())
        throw std::invalid_argument("multi_tensor: reduction of an unknown step");
      note_tensor(red.value);
    }
    for (size_t k = 0; k < e_.steps.size(); ++k) {
      const MtStep& s = e_.steps[k];
      Phase p = kConst;
      bool g = false;
      bool tile = false, post = false;
      for (const MtArg* a : {&s.a, &s.b, &s.c}) {
        if (a->kind == MtArg::kStep && static_cast<size_t>(a->index) >= k)
          throw std::invalid_argument("multi_tensor: a step reads a later step");
        if (a->kind == MtArg::kReduced && static_cast<size_t>(a->index) >= e_.reductions.size())
          throw std::invalid_argument("multi_tensor: a step reads an unknown reduction");
        note_tensor(*a);
        const Phase q = phase_of(*a);
        tile |= q == kTile;
        post |= q == kPost;
        p = std::max(p, q);
        g |= global_of(*a);
      }
      if (tile && post)
        throw std::invalid_argument(
            "multi_tensor: a step mixes per-element values with reduction results");
      if (s.kind == MtStep::kBroadcast) {
        if (p > kColumn) throw std::invalid_argument("multi_tensor: broadcast of a non-scalar");
        p = kTile;
      }
      plan_.phase.push_back(p);
      plan_.global.push_back(g);
      int& count =
          p == kTile ? plan_.tile_steps : (p == kPost ? plan_.post_steps : plan_.column_steps);
      plan_.slot.push_back(p == kConst ? -1 : count++);
    }
    for (const auto& [v, k] : e_.stores) {
      note_tensor(v);
      if (phase_of(v) == kPost)
        throw std::invalid_argument("multi_tensor: a per-element output reads a reduction");
    }
    for (const MtReduction& r : e_.reductions) {
      if (phase_of(r.value) != kTile)
        throw std::invalid_argument("multi_tensor: a reduction of a non-per-element value");
      if (e_.integer) throw std::invalid_argument("multi_tensor: integer reductions");
    }
    if (e_.reductions.size() > 4)
      throw std::invalid_argument("multi_tensor: more than four reductions");
    plan_fusion();
  }

  bool scalar_like(const MtArg& a) const {
    const Phase p = phase_of(a);
    return p == kConst || p == kColumn;
  }

  void plan_fusion() {
    const size_t n = e_.steps.size();
    std::vector<int> uses(n, 0);
    auto use = [&](const MtArg& a) {
      if (a.kind == MtArg::kStep) ++uses[static_cast<size_t>(a.index)];
    };
    for (const MtStep& s : e_.steps) {
      for (const MtArg* a : {&s.a, &s.b, &s.c}) use(*a);
    }
    for (const auto& [v, k] : e_.stores) use(v);
    for (const auto& [v, k] : e_.scalar_stores) use(v);
    for (const MtReduction& r : e_.reductions) use(r.value);
    plan_.fused_into.assign(n, -1);
    plan_.fused_from.assign(n, -1);
    auto tensor_scalar_step = [&](size_t k) {
      const MtStep& s = e_.steps[k];
      return plan_.phase[k] == kTile && s.kind == MtStep::kAlu && plan_.fused_from[k] < 0 &&
             (phase_of(s.a) == kTile) != (phase_of(s.b) == kTile) &&
             (scalar_like(s.a) || scalar_like(s.b));
    };
    for (size_t u = 0; u < n; ++u) {
      const MtStep& s = e_.steps[u];
      if (plan_.phase[u] != kTile || s.kind != MtStep::kAlu) continue;
      for (const auto& [inner, other] : {std::pair{s.a, s.b}, std::pair{s.b, s.a}}) {
        if (inner.kind != MtArg::kStep || !scalar_like(other)) continue;
        const auto k = static_cast<size_t>(inner.index);
        if (uses[k] != 1 || !tensor_scalar_step(k)) continue;
        plan_.fused_into[k] = static_cast<int>(u);
        plan_.fused_from[u] = static_cast<int>(k);
        break;
      }
    }
  }

  // ---- SBUF and PSUM ----
  void allocate() {
    const uint32_t P = core_.sbuf.partitions;
    ntile_bufs_ = static_cast<uint32_t>(plan_.tensors.empty() ? 0 : *plan_.tensors.rbegin() + 1) +
                  static_cast<uint32_t>(plan_.tile_steps) + kScratch;
    const uint64_t budget = core_.sbuf.partition_bytes * 3 / 4;
    max_free_ = std::max<uint64_t>(
        1, std::min<uint64_t>(core_.vector.max_free_elements_sbuf, budget / (2 * ntile_bufs_ * 4)));
    // Tiles of every group, and the largest free size among them.
    uint64_t tile_free = 1;
    tiles_.resize(groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      const MtGroup& grp = groups_[g];
      for (int t : plan_.tensors) {
        if (static_cast<size_t>(t) >= grp.tensors.size())
          throw std::invalid_argument(fmt::format("multi_tensor: group {} has no tensor {}", g, t));
      }
      std::vector<TensorDesc> all = grp.tensors;
      all.insert(all.end(), grp.outputs.begin(), grp.outputs.end());
      if (all.empty()) continue;
      const std::vector<int64_t> sizes =
          grp.outputs.empty() ? grp.tensors[0].sizes : grp.outputs[0].sizes;
      std::vector<std::vector<int64_t>> strides;
      for (const TensorDesc& t : all) strides.push_back(broadcast_strides(t, sizes));
      uint64_t n = 1;
      for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
      if (n > 0) tiles_[g] = make_tiles(sizes, strides, P, max_free_);
      for (const Tile& t : tiles_[g]) tile_free = std::max(tile_free, t.free_elements());
    }
    tile_free_ = tile_free;
    tile_base_ = b_.alloc_sbuf(2 * ntile_bufs_ * tile_free_ * 4);
    size_t nscalars = 0;
    for (const MtGroup& grp : groups_) nscalars = std::max(nscalars, grp.scalars.size());
    ncol_bufs_ = static_cast<uint32_t>(nscalars) + static_cast<uint32_t>(plan_.column_steps) + 3;
    col_base_ = b_.alloc_sbuf(2 * ncol_bufs_ * 4);
    const uint32_t nred = static_cast<uint32_t>(e_.reductions.size());
    if (nred) {
      acc_base_ = b_.alloc_sbuf(3 * nred * 4);  // two group slots and the across-groups one
      part_off_ = b_.alloc_sbuf(4);
      for (auto& bank : psum_bank_) bank = b_.alloc_psum_bank();
    }
    npost_bufs_ = nred + static_cast<uint32_t>(plan_.post_steps) + 3;
    post_base_ = b_.alloc_sbuf(3 * npost_bufs_ * 4);
    (void)P;
  }

  AccessPattern tile_buf(int slot, uint32_t i, const Tile& t) const {
    const uint64_t off = tile_base_ + (uint64_t(slot) * ntile_bufs_ + i) * tile_free_ * 4;
    AccessPattern ap = isa::sbuf(cdt_, 0, t.partitions, off, {{1, t.free_sizes[0]}});
    if (t.nfree == 2) {
      ap.dims[0] = {t.free_sizes[1], t.free_sizes[0]};
      ap.dims[1] = {1, t.free_sizes[1]};
      ap.ndims = 2;
    }
    return ap;
  }
  AccessPattern col_buf(int slot, uint32_t i, uint32_t partitions) const {
    return isa::sbuf_tile(cdt_, partitions, col_base_ + (uint64_t(slot) * ncol_bufs_ + i) * 4, 1);
  }
  // Reduction accumulators: slot 0/1 per group parity, 2 for across-groups.
  AccessPattern acc_buf(int slot, size_t r, uint32_t partitions) const {
    const uint64_t nred = e_.reductions.size();
    return isa::sbuf_tile(DType::kFp32, partitions, acc_base_ + (uint64_t(slot) * nred + r) * 4, 1);
  }
  AccessPattern post_buf(int slot, uint32_t i) const {
    return isa::sbuf_tile(cdt_, 1, post_base_ + (uint64_t(slot) * npost_bufs_ + i) * 4, 1);
  }

  // ---- operands ----
  float const_value(const MtArg& a, const MtGroup& grp) const {
    switch (a.kind) {
      case MtArg::kImm:
        return a.imm;
      case MtArg::kParam:
        if (static_cast<size_t>(a.index) >= grp.params.size())
          throw std::invalid_argument(fmt::format("multi_tensor: no param {}", a.index));
        return grp.params[static_cast<size_t>(a.index)];
      case MtArg::kStep: {
        const MtStep& s = e_.steps.at(static_cast<size_t>(a.index));
        const float x = const_value(s.a, grp);
        switch (s.kind) {
          case MtStep::kAlu:
            return apply_alu_float(s.alu, x, const_value(s.b, grp));
          case MtStep::kAct:
            return apply_activation(s.act, x * s.scale + s.bias);
          case MtStep::kSelect:
            return x != 0.0f ? const_value(s.b, grp) : const_value(s.c, grp);
          case MtStep::kBroadcast:
            return x;
        }
        return 0.0f;
      }
      default:
        throw std::logic_error("multi_tensor: not a constant");
    }
  }

  // The operand of `a` in a given context: tiles (tile != null), columns of `partitions`
  // partitions, or post-reduction [1, 1] values (post).
  Operand operand(const MtArg& a, size_t g, int gslot, int tslot, const Tile* tile,
                  uint32_t partitions, bool post) const {
    const Phase p = phase_of(a);
    if (p == kConst) return {Operand::kImm, {}, const_value(a, groups_[g])};
    const bool full_is_tile = tile != nullptr;
    if (p == kTile) {
      const uint32_t i = a.kind == MtArg::kTensor
                             ? static_cast<uint32_t>(a.index)
                             : tensor_bufs() + static_cast<uint32_t>(plan_.slot[a.index]);
      return {Operand::kFull, tile_buf(tslot, i, *tile), 0.0f};
    }
    if (p == kColumn) {
      const uint32_t i = a.kind == MtArg::kScalar
                             ? static_cast<uint32_t>(a.index)
                             : nscalar_bufs() + static_cast<uint32_t>(plan_.slot[a.index]);
      AccessPattern ap = col_buf(gslot, i, post ? 1 : partitions);
      return {full_is_tile ? Operand::kColumn : Operand::kFull, ap, 0.0f};
    }
    // kPost
    const int pslot = global_of(a) ? 2 : gslot;
    const uint32_t i = a.kind == MtArg::kReduced
                           ? static_cast<uint32_t>(a.index)
                           : static_cast<uint32_t>(e_.reductions.size() + plan_.slot[a.index]);
    return {Operand::kFull, post_buf(pslot, i), 0.0f};
  }

  uint32_t tensor_bufs() const {
    return static_cast<uint32_t>(plan_.tensors.empty() ? 0 : *plan_.tensors.rbegin() + 1);
  }
  uint32_t nscalar_bufs() const {
    return ncol_bufs_ - 3 - static_cast<uint32_t>(plan_.column_steps);
  }

  // Brings an operand to the destination's shape in buffer m.
  AccessPattern materialise(StreamId e, const Operand& o, const AccessPattern& m) {
    if (o.kind == Operand::kFull) return o.ap;
    if (o.kind == Operand::kImm) {
      b_.emit(e, isa::memset(m, o.imm));
      return m;
    }
    b_.emit(e, isa::memset(m, 0.0f));
    b_.emit(e, isa::tensor_scalar(m, m, AluOp::kAdd, isa::per_partition(o.ap)));
    return m;
  }

  static ScalarOperand scalar_operand(const Operand& o) {
    return o.kind == Operand::kImm ? isa::imm(o.imm) : isa::per_partition(o.ap);
  }

  static StreamId engine_of(const MtStep& s) { return s.kind == MtStep::kAct ? kScalar : kVector; }

  // Emits one step; scratch1/2 are buffers of the destination's shape.
  void emit_step(const MtStep& s, const Operand& a, const Operand& bo, const Operand& c,
                 const AccessPattern& dst, const AccessPattern& scratch1,
                 const AccessPattern& scratch2) {
    const StreamId e = engine_of(s);
    auto scalar_of = scalar_operand;
    switch (s.kind) {
      case MtStep::kAlu:
        if (a.kind == Operand::kFull && bo.kind == Operand::kFull) {
          b_.emit(e, isa::tensor_tensor(dst, a.ap, bo.ap, s.alu));
        } else if (a.kind == Operand::kFull) {
          b_.emit(e, isa::tensor_scalar(dst, a.ap, s.alu, scalar_of(bo)));
        } else if (bo.kind == Operand::kFull) {
          Instruction in = isa::tensor_scalar(dst, bo.ap, s.alu, scalar_of(a));
          in.reverse0 = true;
          b_.emit(e, in);
        } else {
          // Two columns in a per-element step cannot happen (the step would be a column step).
          throw std::logic_error("multi_tensor: ALU step without a per-element operand");
        }
        return;
      case MtStep::kAct:
        b_.emit(e, isa::activation(dst, materialise(e, a, scratch1), s.act, isa::imm(s.scale),
                                   isa::imm(s.bias)));
        return;
      case MtStep::kSelect: {
        const AccessPattern pred = materialise(e, a, scratch1);
        const AccessPattern on_true = materialise(e, bo, dst);
        if (c.kind == Operand::kImm) {
          b_.emit(e, isa::select(dst, pred, on_true, c.imm));
        } else {
          b_.emit(e, isa::select(dst, pred, on_true, materialise(e, c, scratch2)));
        }
        return;
      }
      case MtStep::kBroadcast:
        materialise(e, a, dst);
        return;
    }
  }

  // ---- groups ----
  void init_global_accumulators() {
    const uint32_t P = core_.sbuf.partitions;
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      if (e_.reductions[r].across_groups)
        b_.emit(kVector, isa::memset(acc_buf(2, r, P), identity(e_.reductions[r].op)));
    }
  }

  void wait_all(StreamId s, const std::vector<Token>& ts) {
    for (const Token& t : ts) b_.wait(s, t);
  }

  void run_group(size_t g) {
    const MtGroup& grp = groups_[g];
    const uint32_t P = core_.sbuf.partitions;
    const int gs = static_cast<int>(g % 2);
    // Columns: the group's scalars, then its column steps (all partitions hold the value).
    std::vector<Token> col_ready;
    if (!grp.scalars.empty()) {
      wait_all(kColLoad, group_free_[gs]);
      for (size_t i = 0; i < grp.scalars.size(); ++i) {
        b_.emit(kColLoad, isa::dma_copy(col_buf(gs, static_cast<uint32_t>(i), P),
                                        hbm_ap(grp.scalars[i], 0, P, 0, {{1, 1}})));
      }
      col_ready.push_back(b_.mark(kColLoad));
    }
    std::vector<Token> done(e_.steps.size());
    std::set<int> col_engines;
    for (size_t k = 0; k < e_.steps.size(); ++k) {
      if (plan_.phase[k] != kColumn) continue;
      const MtStep& s = e_.steps[k];
      const StreamId e = engine_of(s);
      wait_all(e, group_free_[gs]);
      wait_all(e, col_ready);
      for (const MtArg* a : {&s.a, &s.b, &s.c}) {
        if (a->kind == MtArg::kStep) b_.wait(e, done[a->index]);
      }
      const AccessPattern dst =
          col_buf(gs, nscalar_bufs() + static_cast<uint32_t>(plan_.slot[k]), P);
      emit_step(s, operand(s.a, g, gs, 0, nullptr, P, false),
                operand(s.b, g, gs, 0, nullptr, P, false),
                operand(s.c, g, gs, 0, nullptr, P, false), dst,
                col_buf(gs, ncol_bufs_ - (s.kind == MtStep::kAct ? 3 : 2), P),
                col_buf(gs, ncol_bufs_ - 1, P));
      done[k] = b_.mark(e);
      col_engines.insert(static_cast<int>(e.engine));
    }
    for (size_t k = 0; k < e_.steps.size(); ++k) {
      if (plan_.phase[k] == kColumn) col_ready.push_back(done[k]);
    }
    // Per-group accumulators.
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      if (e_.reductions[r].across_groups) continue;
      wait_all(kVector, group_free_[gs]);
      b_.emit(kVector, isa::memset(acc_buf(gs, r, P), identity(e_.reductions[r].op)));
    }

    for (const Tile& t : tiles_[g]) run_tile(g, gs, t, col_ready, done);
    last_col_ready_ = col_ready;

    // Reductions across partitions: transpose the [P, 1] accumulator on TensorE, reduce the row.
    std::vector<Token> end;
    bool post_work = false;
    const Token acc_ready = b_.mark(kVector);
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      if (e_.reductions[r].across_groups) continue;
      finish_reduction(r, gs, gs, acc_ready);
      post_work = true;
    }
    if (post_work) run_post(g, gs, false);
    for (StreamId s : {kVector, kScalar, kTensor, kColStore}) end.push_back(b_.mark(s));
    group_free_[gs] = end;
  }

  void finish_reduction(size_t r, int acc_slot, int post_slot, Token acc_ready) {
    const uint32_t P = core_.sbuf.partitions;
    const AccessPattern ps =
        isa::psum_tile(DType::kFp32, 1, psum_bank_[post_slot == 2 ? 0 : post_slot] + r * P * 4, P);
    b_.wait(kTensor, acc_ready);
    b_.emit(kTensor, isa::transpose(ps, acc_buf(acc_slot, r, P)));
    b_.wait(kVector, b_.mark(kTensor));
    b_.emit(kVector, isa::tensor_reduce(post_buf(post_slot, static_cast<uint32_t>(r)), ps,
                                        e_.reductions[r].op));
  }

  // Post-reduction steps and the scalar stores of a group (global: the across-groups ones).
  void run_post(size_t g, int gs, bool global) {
    const MtGroup& grp = groups_[g];
    const int pslot = global ? 2 : gs;
    std::vector<Token> done(e_.steps.size());
    Token reduced = b_.mark(kVector);
    for (size_t k = 0; k < e_.steps.size(); ++k) {
      if (plan_.phase[k] != kPost || plan_.global[k] != global) continue;
      const MtStep& s = e_.steps[k];
      const StreamId e = engine_of(s);
      b_.wait(e, reduced);
      wait_all(e, last_col_ready_);
      for (const MtArg* a : {&s.a, &s.b, &s.c}) {
        if (a->kind == MtArg::kStep && plan_.phase[a->index] == kPost) b_.wait(e, done[a->index]);
      }
      const AccessPattern dst =
          post_buf(pslot, static_cast<uint32_t>(e_.reductions.size() + plan_.slot[k]));
      emit_step(s, operand(s.a, g, gs, 0, nullptr, 1, true),
                operand(s.b, g, gs, 0, nullptr, 1, true), operand(s.c, g, gs, 0, nullptr, 1, true),
                dst, post_buf(pslot, npost_bufs_ - (s.kind == MtStep::kAct ? 3 : 2)),
                post_buf(pslot, npost_bufs_ - 1));
      done[k] = b_.mark(e);
    }
    wait_all(kColStore, last_col_ready_);
    for (const auto& [v, k] : e_.scalar_stores) {
      if (global_of(v) != global) continue;
      if (static_cast<size_t>(k) >= grp.scalar_outputs.size())
        throw std::invalid_argument(fmt::format("multi_tensor: no scalar output {}", k));
      const Phase p = phase_of(v);
      if (!global && p == kTile)
        throw std::invalid_argument("multi_tensor: a scalar output of a per-element value");
      AccessPattern src;
      if (p == kConst) {
        src = post_buf(pslot, npost_bufs_ - 2);
        b_.emit(kVector, isa::memset(src, const_value(v, grp)));
        b_.wait(kColStore, b_.mark(kVector));
      } else {
        src = operand(v, g, gs, 0, nullptr, 1, true).ap;
        if (v.kind == MtArg::kStep && p == kPost) {
          b_.wait(kColStore, done[v.index]);
        } else {
          b_.wait(kColStore, b_.mark(kVector));
          b_.wait(kColStore, b_.mark(kScalar));
        }
      }
      b_.emit(kColStore,
              isa::dma_copy(hbm_ap(grp.scalar_outputs[static_cast<size_t>(k)], 0, 1, 0, {{1, 1}}),
                            src));
    }
  }

  void run_tile(size_t g, int gs, const Tile& t, const std::vector<Token>& col_ready,
                std::vector<Token>& done) {
    const MtGroup& grp = groups_[g];
    const int s = static_cast<int>(ntiles_++ % 2);
    // Loads.
    wait_all(kLoad, slot_free_[s]);
    for (int i : plan_.tensors) {
      b_.emit(kLoad, isa::dma_copy(tile_buf(s, static_cast<uint32_t>(i), t),
                                   tile_ap(grp.tensors[i], t, t.operands[i])));
    }
    const Token loaded = plan_.tensors.empty() ? Token{} : b_.mark(kLoad);
    std::set<int> used;
    const AccessPattern scratch1 = tile_buf(s, ntile_bufs_ - 3, t),
                        scratch2 = tile_buf(s, ntile_bufs_ - 2, t),
                        scratch_act = tile_buf(s, ntile_bufs_ - 1, t);
    for (size_t k = 0; k < e_.steps.size(); ++k) {
      if (plan_.phase[k] != kTile || plan_.fused_into[k] >= 0) continue;
      const MtStep& st = e_.steps[k];
      const StreamId e = engine_of(st);
      wait_all(e, slot_free_[s]);
      wait_all(e, col_ready);
      const int from = plan_.fused_from[k];
      for (const MtStep* w : {&st, from >= 0 ? &e_.steps[from] : &st}) {
        for (const MtArg* a : {&w->a, &w->b, &w->c}) {
          if (a->kind == MtArg::kTensor) b_.wait(e, loaded);
          if (a->kind == MtArg::kStep && a->index != from && plan_.phase[a->index] == kTile)
            b_.wait(e, done[a->index]);
        }
      }
      const AccessPattern dst =
          tile_buf(s, tensor_bufs() + static_cast<uint32_t>(plan_.slot[k]), t);
      auto op = [&](const MtArg& a) { return operand(a, g, gs, s, &t, t.partitions, false); };
      if (from >= 0) {
        // (x op0 s0) op1 s1 as one tensor_scalar.
        const MtStep& in = e_.steps[from];
        const bool rev0 = phase_of(in.a) != kTile;
        const Operand x = op(rev0 ? in.b : in.a), s0 = op(rev0 ? in.a : in.b);
        const bool rev1 = !(st.a.kind == MtArg::kStep && st.a.index == from);
        const Operand s1 = op(rev1 ? st.a : st.b);
        Instruction ins =
            isa::tensor_scalar(dst, x.ap, in.alu, scalar_operand(s0), st.alu, scalar_operand(s1));
        ins.reverse0 = rev0;
        ins.reverse1 = rev1;
        b_.emit(e, ins);
      } else {
        emit_step(st, op(st.a), op(st.b), op(st.c), dst,
                  st.kind == MtStep::kAct ? scratch_act : scratch1, scratch2);
      }
      done[k] = b_.mark(e);
      used.insert(static_cast<int>(e.engine));
    }
    // Stores.
    const size_t nt = grp.tensors.size();
    for (const auto& [v, k] : e_.stores) {
      if (static_cast<size_t>(k) >= grp.outputs.size())
        throw std::invalid_argument(fmt::format("multi_tensor: group {} has no output {}", g, k));
      Operand o = operand(v, g, gs, s, &t, t.partitions, false);
      if (o.kind != Operand::kFull) {
        wait_all(kVector, slot_free_[s]);
        wait_all(kVector, col_ready);
        o.ap = materialise(kVector, o, scratch1);
        b_.wait(kStore, b_.mark(kVector));
        used.insert(static_cast<int>(EngineKind::kVector));
      } else if (v.kind == MtArg::kTensor) {
        b_.wait(kStore, loaded);
      } else {
        b_.wait(kStore, done[v.index]);
      }
      b_.emit(kStore, isa::dma_copy(tile_ap(grp.outputs[k], t, t.operands[nt + k]), o.ap));
    }
    // Reductions: the tile's partial per partition, combined into the accumulator.
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      const MtReduction& red = e_.reductions[r];
      const Operand o = operand(red.value, g, gs, s, &t, t.partitions, false);
      b_.wait(kVector, red.value.kind == MtArg::kTensor ? loaded : done[red.value.index]);
      const AccessPattern part = isa::sbuf_tile(DType::kFp32, t.partitions, part_off_, 1);
      const AccessPattern acc = acc_buf(red.across_groups ? 2 : gs, r, t.partitions);
      b_.emit(kVector, isa::tensor_reduce(part, o.ap, red.op, t.nfree));
      b_.emit(kVector, isa::tensor_tensor(acc, acc, part, combine_op(red.op)));
      used.insert(static_cast<int>(EngineKind::kVector));
    }
    std::vector<Token> release;
    if (!e_.stores.empty()) release.push_back(b_.mark(kStore));
    for (int eng : used) {
      release.push_back(b_.mark(eng == static_cast<int>(EngineKind::kScalar) ? kScalar : kVector));
    }
    slot_free_[s] = release;
  }

  void finish_global() {
    bool any = false;
    const Token acc_ready = b_.mark(kVector);
    for (size_t r = 0; r < e_.reductions.size(); ++r) {
      if (!e_.reductions[r].across_groups) continue;
      finish_reduction(r, 2, 2, acc_ready);
      any = true;
    }
    if (any && !groups_.empty())
      run_post(groups_.size() - 1, static_cast<int>((groups_.size() - 1) % 2), true);
  }

  const StreamId kLoad = dma_queue(0), kStore = dma_queue(1), kColLoad = dma_queue(2),
                 kColStore = dma_queue(3);

  ProgramBuilder b_;
  const std::vector<MtGroup>& groups_;
  const MtExpr& e_;
  const CoreParams& core_;
  DType cdt_;
  Plan plan_;
  std::vector<std::vector<Tile>> tiles_;
  uint32_t ntile_bufs_ = 0, ncol_bufs_ = 0, npost_bufs_ = 0;
  uint64_t max_free_ = 1, tile_free_ = 1, tile_base_ = 0, col_base_ = 0, acc_base_ = 0,
           part_off_ = 0, post_base_ = 0;
  uint64_t psum_bank_[2] = {};
  uint64_t ntiles_ = 0;
  std::vector<Token> slot_free_[2], group_free_[2], last_col_ready_;
};

}  // namespace

Program build_multi_tensor(const std::string& name, const std::vector<MtGroup>& groups,
                           const MtExpr& expr, const CoreParams& core) {
  return MultiTensorBuilder(name, groups, expr, core).build();
}

}  // namespace neuronsim::kernels
