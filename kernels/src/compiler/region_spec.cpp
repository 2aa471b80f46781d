// Builds the emitter input of a region: maps every value its ops touch onto the region's tile
// space (full tiles, per-row columns, per-column rows, scalars) and every HBM tensor onto
// strides over that space.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "neuronsim/kernels/compiler/fusion.h"

namespace neuronsim::kernels::compiler {

uint64_t virtual_address(int value) {
  return (static_cast<uint64_t>(value) + 1) << 40;
}

int virtual_value(uint64_t address) {
  const uint64_t v = address >> 40;
  return v == 0 ? -1 : static_cast<int>(v - 1);
}

namespace {

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

// Strides of a tensor broadcast (right-aligned) onto `to`; nullopt when it does not broadcast.
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& sizes,
                                              const std::vector<int64_t>& strides,
                                              const std::vector<int64_t>& to) {
  if (sizes.size() > to.size()) {
    // Leading size-1 dims may be dropped.
    const size_t extra = sizes.size() - to.size();
    for (size_t d = 0; d < extra; ++d) {
      if (sizes[d] != 1) return std::nullopt;
    }
    return broadcast(
        std::vector<int64_t>(sizes.begin() + static_cast<int64_t>(extra), sizes.end()),
        std::vector<int64_t>(strides.begin() + static_cast<int64_t>(extra), strides.end()), to);
  }
  std::vector<int64_t> out(to.size(), 0);
  const size_t off = to.size() - sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == to[off + d]) {
      out[off + d] = to[off + d] == 1 ? 0 : strides[d];
    } else if (sizes[d] != 1) {
      return std::nullopt;
    }
  }
  return out;
}

bool same_strides(const std::vector<int64_t>& sizes, const std::vector<int64_t>& a,
                  const std::vector<int64_t>& b) {
  if (a.size() != b.size() || a.size() != sizes.size()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1 && a[d] != b[d]) return false;
  }
  return true;
}

Space join(Space a, Space b) {
  if (a == b) return a;
  if (a == Space::kFull || b == Space::kFull) return Space::kFull;
  if ((a == Space::kRow && b == Space::kCol) || (a == Space::kCol && b == Space::kRow))
    return Space::kFull;
  if (a == Space::kScalar) return b;
  return a;
}

// Does `inner` fit where a result of space `outer` is computed?
bool fits_in(Space inner, Space outer) {
  return join(inner, outer) == outer;
}

class SpecBuilder {
 public:
  SpecBuilder(const LoweredGraph& g, const std::vector<int>& ops, const std::vector<int>& stores)
      : g_(g), ops_(ops.begin(), ops.end()), stores_(stores.begin(), stores.end()), order_(ops) {}

  std::optional<RegionSpec> build(std::string* why) {
    try {
      run();
      return std::move(rs_);
    } catch (const Fail& f) {
      if (why) *why = f.what();
      return std::nullopt;
    }
  }

 private:
  struct Fail : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  [[noreturn]] static void fail(const std::string& s) { throw Fail(s); }

  const TensorMeta& meta(int v) const { return g_.graph.value(v).meta; }
  TileProgramSpec& tile() { return rs_.tile; }

  std::vector<int64_t> shape_of(int v) const {
    const auto& s = meta(v).sizes;
    return s.empty() ? std::vector<int64_t>{1} : s;
  }
  std::vector<int64_t> strides_of(int v) const {
    const auto& s = meta(v).strides;
    return s.empty() ? std::vector<int64_t>{1} : s;
  }

  // Logical or memory strides of a value used in an op whose result has `out` sizes and
  // `space`, expressed over the region shape; nullopt when not expressible.
  std::optional<std::vector<int64_t>> over_region(const std::vector<int64_t>& sizes,
                                                  const std::vector<int64_t>& strides,
                                                  const std::vector<int64_t>& out, Space space) {
    auto b = broadcast(sizes, strides, out);
    if (!b) return std::nullopt;
    if (space == Space::kFull) return view_strides(out, *b, S_);
    auto r = view_strides(out, *b, S_row_);
    if (!r) return std::nullopt;
    r->back() = 0;
    return r;
  }

  Space classify(const std::vector<int64_t>& ls) const {
    const size_t nd = S_.size();
    if (numel_of(S_) == 1) return Space::kFull;
    bool scalar = true, full = true, row = true, col = true;
    const std::vector<int64_t> cs = contiguous_strides(S_);
    for (size_t d = 0; d < nd; ++d) {
      if (S_[d] == 1) continue;
      scalar &= ls[d] == 0;
      full &= ls[d] == cs[d];
      if (d + 1 < nd) {
        row &= ls[d] == cs[d] / std::max<int64_t>(C_, 1);
        col &= ls[d] == 0;
      } else {
        row &= ls[d] == 0;
        col &= ls[d] == 1;
      }
    }
    if (scalar) return Space::kScalar;
    if (full) return Space::kFull;
    if (row) return Space::kRow;
    if (col) return Space::kCol;
    // A general broadcast from memory: constant along the columns, it loads one value per row
    // (read with stride 0); otherwise as full tiles.
    if (ls[nd - 1] == 0) return Space::kRow;
    return Space::kFull;
  }
  bool exact_space(const std::vector<int64_t>& ls, Space s) const {
    const size_t nd = S_.size();
    const std::vector<int64_t> cs = contiguous_strides(S_);
    for (size_t d = 0; d < nd; ++d) {
      if (S_[d] == 1) continue;
      int64_t want = 0;
      switch (s) {
        case Space::kFull:
          want = cs[d];
          break;
        case Space::kRow:
          want = d + 1 < nd ? cs[d] / std::max<int64_t>(C_, 1) : 0;
          break;
        case Space::kCol:
          want = d + 1 < nd ? 0 : 1;
          break;
        case Space::kScalar:
          want = 0;
          break;
      }
      if (ls[d] != want) return false;
    }
    return true;
  }

  int add_instr(TileInstr in) {
    tile().instrs.push_back(std::move(in));
    return static_cast<int>(tile().instrs.size()) - 1;
  }

  /// The instruction holding value `v` as used by an op with result sizes `out` and `space`.
  int resolve(int v, const std::vector<int64_t>& out, Space space) {
    auto it = instr_of_.find(v);
    if (it != instr_of_.end()) {
      if (late_.count(v)) fail("uses a reduction over rows inside its region");
      auto ls = over_region(shape_of(v), contiguous_strides(shape_of(v)), out, space);
      if (!ls || !exact_space(*ls, space_of_.at(v))) {
        fail(fmt::format("{} is used with another broadcast than it has in the region",
                         g_.graph.value(v).name));
      }
      return it->second;
    }
    const Value& val = g_.graph.value(v);
    if (val.temporary) fail("a compiler temporary from outside the region");
    if (!val.meta.fusable()) fail("operand " + val.meta.to_string() + " is not fusable");
    if (reads_own_store(v)) fail("reads back what the region stores");
    auto ms = over_region(shape_of(v), strides_of(v), out, space);
    auto ls = over_region(shape_of(v), contiguous_strides(shape_of(v)), out, space);
    if (!ms || !ls) fail(fmt::format("{} does not map onto the region's tiles", val.name));
    Space usage = classify(*ls);
    if (space == Space::kRow && usage != Space::kScalar) usage = Space::kRow;
    if (usage == Space::kFull && space != Space::kFull) fail("full operand of a per-row result");
    for (size_t k = 0; k < tile().operands.size(); ++k) {
      const TileOperand& o = tile().operands[k];
      if (o.value == v && o.space == usage && o.strides == *ms &&
          loaded_.count(static_cast<int>(k)))
        return loaded_.at(static_cast<int>(k));
    }
    TileOperand o;
    o.value = v;
    o.address = virtual_address(v);
    o.dtype = val.meta.dtype;
    o.strides = *ms;
    o.space = usage;
    tile().operands.push_back(o);
    const int k = static_cast<int>(tile().operands.size()) - 1;
    TileInstr in;
    in.kind = TileInstr::Kind::kLoad;
    in.space = usage;
    in.operand = k;
    const int i = add_instr(in);
    loaded_[k] = i;
    if (std::find(rs_.loads.begin(), rs_.loads.end(), v) == rs_.loads.end()) rs_.loads.push_back(v);
    return i;
  }

  // Whether v's memory is written by an op of this region (through views outside it).
  bool reads_own_store(int v) const {
    int cur = v;
    for (int guard = 0; guard < 1000; ++guard) {
      auto it = producer_.find(cur);
      if (it == producer_.end()) return false;
      const Op& op = g_.ops[static_cast<size_t>(it->second)];
      if (ops_.count(it->second)) return true;
      if (op.kind != Op::Kind::kView) return false;
      cur = op.inputs.at(0);
    }
    return false;
  }

  TileOperand store_operand(int v, Space space) {
    const Value& val = g_.graph.value(v);
    if (val.temporary) fail("a compiler temporary leaves the region");
    auto ms = over_region(shape_of(v), strides_of(v), shape_of(v), space);
    if (!ms)
      fail(fmt::format("{} ({}) cannot be stored from the region's tiles", val.name,
                       val.meta.to_string()));
    TileOperand o;
    o.value = v;
    o.address = virtual_address(v);
    o.dtype = val.meta.dtype;
    o.strides = *ms;
    o.space = space;
    return o;
  }

  void maybe_store(int v) {
    if (!stores_.count(v) || late_.count(v)) return;
    tile().operands.push_back(store_operand(v, space_of_.at(v)));
    TileInstr in;
    in.kind = TileInstr::Kind::kStore;
    in.space = space_of_.at(v);
    in.operand = static_cast<int>(tile().operands.size()) - 1;
    in.src = instr_of_.at(v);
    add_instr(in);
    rs_.stores.push_back(v);
  }

  void set_shape(const std::vector<int64_t>& s) {
    S_ = s.empty() ? std::vector<int64_t>{1} : s;
    C_ = S_.back();
    S_row_ = S_;
    S_row_.back() = 1;
    R_ = C_ ? numel_of(S_) / C_ : 0;
    tile().shape = S_;
  }

  static bool is_reshape(const TensorMeta& in, const TensorMeta& out) {
    if (in.numel() != out.numel() || in.storage_offset != out.storage_offset) return false;
    auto vs = view_strides(in.sizes, in.strides, out.sizes);
    return vs && same_strides(out.sizes, *vs, out.strides);
  }

  void run() {
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const Op& op = g_.ops[i];
      if (op.output >= 0) producer_[op.output] = static_cast<int>(i);
    }
    if (order_.empty()) fail("empty region");
    const Op& first = g_.ops.at(static_cast<size_t>(order_.front()));
    switch (first.kind) {
      case Op::Kind::kMatmul:
        rs_.matmul = true;
        set_shape(shape_of(first.output));
        break;
      case Op::Kind::kReduce:
        set_shape(shape_of(first.inputs.at(0)));
        break;
      case Op::Kind::kPointwise:
      case Op::Kind::kView:
        set_shape(shape_of(first.output));
        break;
      default:
        fail("opaque op");
    }
    if (R_ == 0 || C_ == 0) fail("empty tensor");
    for (size_t oi = 0; oi < order_.size(); ++oi) {
      const int opi = order_[oi];
      const Op& op = g_.ops.at(static_cast<size_t>(opi));
      switch (op.kind) {
        case Op::Kind::kMatmul:
          if (oi != 0) fail("a second matmul");
          matmul(op);
          break;
        case Op::Kind::kView:
          view(op);
          break;
        case Op::Kind::kPointwise:
          pointwise(op);
          break;
        case Op::Kind::kReduce:
          reduce(op);
          break;
        default:
          fail("opaque op in a region");
      }
    }
    tile().name = "";
  }

  void matmul(const Op& op) {
    const int a = op.inputs.at(0), b = op.inputs.at(1), c = op.output;
    for (int v : {a, b}) {
      if (g_.graph.value(v).temporary) fail("matmul of a temporary");
      if (reads_own_store(v)) fail("matmul reads its own region");
    }
    const auto& am = meta(a);
    const auto& bm = meta(b);
    const auto& cm = meta(c);
    if (am.dim() < 2 || bm.dim() < 2 || cm.dim() < 2) fail("matmul of vectors");
    MatmulRegionSpec& mm = rs_.mm;
    const size_t nd = cm.sizes.size();
    mm.batch.assign(cm.sizes.begin(), cm.sizes.end() - 2);
    mm.m = cm.sizes[nd - 2];
    mm.n = cm.sizes[nd - 1];
    mm.k = am.sizes.back();
    auto operand = [&](int v, const TensorMeta& m) {
      MatmulOperand o;
      o.value = v;
      o.address = virtual_address(v);
      o.dtype = m.dtype;
      const size_t d = m.sizes.size();
      o.row_stride = m.sizes[d - 2] == 1 ? 0 : m.strides[d - 2];
      o.col_stride = m.sizes[d - 1] == 1 ? 0 : m.strides[d - 1];
      std::vector<int64_t> bs(mm.batch.size(), 0);
      const size_t off = mm.batch.size() - std::min(mm.batch.size(), d - 2);
      for (size_t k = 0; k + 2 < d && off + k < bs.size(); ++k) {
        bs[off + k] = m.sizes[k] == 1 ? 0 : m.strides[k];
      }
      o.batch_strides = bs;
      return o;
    };
    mm.a = operand(a, am);
    mm.b = operand(b, bm);
    if (bm.sizes[bm.sizes.size() - 2] != mm.k) fail("matmul shapes do not match");
    rs_.loads.push_back(a);
    rs_.loads.push_back(b);
    TileInstr acc;
    acc.kind = TileInstr::Kind::kAcc;
    acc.space = Space::kFull;
    instr_of_[c] = add_instr(acc);
    space_of_[c] = Space::kFull;
    maybe_store(c);
  }

  void view(const Op& op) {
    const int in = op.inputs.at(0), out = op.output;
    if (!instr_of_.count(in)) fail("a view of a value outside the region");
    if (late_.count(in)) fail("a view of a reduction over rows");
    if (is_reshape(meta(in), meta(out))) {
      instr_of_[out] = instr_of_.at(in);
      space_of_[out] = space_of_.at(in);
      // A reshape keeps the element order; its space follows from its element count.
      maybe_store(out);
      return;
    }
    // expand (its strides are the input's, broadcast): a broadcasting copy. Other views
    // (permutes, slices) reorder or drop elements: they read what the region stores.
    const auto bs = broadcast(meta(in).sizes, meta(in).strides, meta(out).sizes);
    if (!bs || !same_strides(meta(out).sizes, *bs, meta(out).strides) ||
        meta(in).storage_offset != meta(out).storage_offset) {
      fail("a view that is neither a reshape nor an expand inside a region");
    }
    const std::vector<int64_t> o = shape_of(out);
    const Space k = numel_of(o) == numel_of(S_) ? Space::kFull : Space::kRow;
    if (k == Space::kRow && numel_of(o) != R_) fail("expand outside the tile space");
    const int src = resolve(in, o, k);
    TileInstr s;
    s.kind = TileInstr::Kind::kStep;
    s.space = k;
    s.step.kind = Step::kAlu;
    s.step.alu = device_model::AluOp::kBypass;
    s.step.a = kernels::Arg::step(src);
    s.step.b = kernels::Arg::constant(0);
    instr_of_[out] = add_instr(s);
    space_of_[out] = k;
    maybe_store(out);
  }

  void pointwise(const Op& op) {
    const std::vector<int64_t> o = shape_of(op.output);
    Space k;
    if (numel_of(o) == numel_of(S_)) {
      k = Space::kFull;
    } else if (numel_of(o) == R_) {
      k = Space::kRow;
    } else {
      fail(fmt::format("result {} does not fit the tile space", meta(op.output).to_string()));
    }
    std::vector<int> step_instr(op.expr.steps.size(), -1);
    for (size_t s = 0; s < op.expr.steps.size(); ++s) {
      const Step& st = op.expr.steps[s];
      TileInstr in;
      in.kind = TileInstr::Kind::kStep;
      in.step = st;
      std::optional<Space> sp;
      for (kernels::Arg* a : {&in.step.a, &in.step.b, &in.step.c}) {
        if (a->kind == kernels::Arg::kInput) {
          const int i = resolve(op.inputs.at(static_cast<size_t>(a->index)), o, k);
          *a = kernels::Arg::step(i);
        } else if (a->kind == kernels::Arg::kStep) {
          *a = kernels::Arg::step(step_instr.at(static_cast<size_t>(a->index)));
        } else {
          continue;
        }
        const Space as = tile().instrs.at(static_cast<size_t>(a->index)).space;
        sp = sp ? join(*sp, as) : as;
      }
      // Only tensor operands count for select's unused slots; unary steps leave b/c as imm.
      Space space = sp ? *sp : k;
      if (s + 1 == op.expr.steps.size()) {
        if (!fits_in(space, k)) fail("a full-tile step in a per-row result");
        space = k;
      }
      if (space == Space::kCol && k == Space::kFull) space = Space::kFull;
      in.space = space;
      step_instr[s] = add_instr(in);
    }
    instr_of_[op.output] = step_instr.back();
    space_of_[op.output] = k;
    maybe_store(op.output);
  }

  void reduce(const Op& op) {
    const int x = op.inputs.at(0), out = op.output;
    const std::vector<int64_t> xs = shape_of(x);
    const size_t nd = meta(x).sizes.size();
    std::set<int64_t> dims(op.dims.begin(), op.dims.end());
    const bool all = nd == 0 || dims.size() == nd;
    const bool full_input = numel_of(xs) == numel_of(S_) && xs.back() == C_;
    const bool last_only =
        nd >= 1 && dims.size() == 1 && *dims.begin() == static_cast<int64_t>(nd - 1);
    const bool rows_only =
        nd >= 2 && dims.size() == nd - 1 && !dims.count(static_cast<int64_t>(nd - 1));
    const bool sum = op.reduce == device_model::ReduceOp::kAdd && !op.nonzero;
    if (full_input && last_only) {
      TileInstr in;
      in.kind = TileInstr::Kind::kRowReduce;
      in.space = Space::kRow;
      in.src = resolve(x, xs, Space::kFull);
      in.reduce = op.reduce;
      in.scale = op.scale;
      in.nonzero = op.nonzero;
      instr_of_[out] = add_instr(in);
      space_of_[out] = Space::kRow;
      maybe_store(out);
      return;
    }
    if (rs_.matmul) fail("a reduction over rows in a matmul epilogue");
    if (!sum) fail("only sums reduce over rows");
    if (!stores_.count(out)) fail("a reduction over rows whose result stays in the region");
    TileInstr in;
    in.kind = TileInstr::Kind::kColReduce;
    in.scale = op.scale;
    if (full_input && rows_only) {
      in.src = resolve(x, xs, Space::kFull);
      in.space = Space::kCol;
    } else if (all && full_input) {
      TileInstr r;
      r.kind = TileInstr::Kind::kRowReduce;
      r.space = Space::kRow;
      r.src = resolve(x, xs, Space::kFull);
      r.reduce = device_model::ReduceOp::kAdd;
      in.src = add_instr(r);
      in.space = Space::kScalar;
    } else if (all && numel_of(xs) == R_) {
      in.src = resolve(x, xs, Space::kRow);
      in.space = Space::kScalar;
    } else {
      fail("reduces dims that are neither the columns nor the rows of the region");
    }
    const Value& ov = g_.graph.value(out);
    if (ov.temporary) fail("a compiler temporary leaves the region");
    TileOperand o;
    o.value = out;
    o.address = virtual_address(out);
    o.dtype = ov.meta.dtype;
    o.space = in.space;
    // [.., C] (or a scalar) onto the region shape: zero strides over the rows.
    auto b = broadcast(shape_of(out), strides_of(out), S_);
    if (in.space == Space::kCol) {
      // sum(dims=rows, keepdim=False) drops the row dims: [C] broadcasts onto S.
      if (!b) fail("cannot place the column sums");
      o.strides = *b;
    } else {
      o.strides.assign(S_.size(), 0);
    }
    tile().operands.push_back(o);
    in.operand = static_cast<int>(tile().operands.size()) - 1;
    const int i = add_instr(in);
    instr_of_[out] = i;
    space_of_[out] = in.space;
    late_.insert(out);
    rs_.stores.push_back(out);
  }

  const LoweredGraph& g_;
  std::set<int> ops_;
  std::set<int> stores_;
  std::vector<int> order_;
  RegionSpec rs_;
  std::vector<int64_t> S_, S_row_;
  int64_t C_ = 1, R_ = 1;
  std::map<int, int> instr_of_;
  std::map<int, Space> space_of_;
  std::set<int> late_;
  std::map<int, int> loaded_;  // operand -> load instruction
  std::map<int, int> producer_;
};

}  // namespace

std::optional<RegionSpec> build_region_spec(const LoweredGraph& g, const std::vector<int>& ops,
                                            const std::vector<int>& stores, std::string* why) {
  SpecBuilder b(g, ops, stores);
  auto rs = b.build(why);
  if (rs && rs->matmul) rs->mm.epilogue = rs->tile;
  return rs;
}

}  // namespace neuronsim::kernels::compiler
