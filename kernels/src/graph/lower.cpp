#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "neuronsim/kernels/graph/lowering.h"

namespace neuronsim::kernels::graph {

using device::ActFunc;
using device::AluOp;
using device::ReduceOp;

namespace {

/// Raised by a lowering rule for arguments it does not handle; the node stays opaque.
struct NotLowered : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Lowerer {
 public:
  Lowerer(LoweredGraph& out, int node_index) : out_(out), index_(node_index) {}

  const Node& node() const { return out_.graph.nodes().at(static_cast<size_t>(index_)); }
  const TensorMeta& meta(int v) const { return out_.graph.value(v).meta; }

  /// The tensor argument `name` (a device value).
  int tensor(const std::string& name) const {
    const Arg& a = node().arg(name);
    if (a.kind != Arg::Kind::kTensor) throw NotLowered(name + " is not a tensor");
    return a.value;
  }
  bool has(const std::string& name) const {
    const Arg* a = node().find(name);
    return a && !a->is_none();
  }
  double number(const std::string& name, double fallback) const {
    const Arg* a = node().find(name);
    if (!a || a->is_none()) return fallback;
    if (a->kind == Arg::Kind::kTensor) throw NotLowered(name + " is a tensor");
    return a->as_double();
  }
  std::string str(const std::string& name) const {
    const Arg* a = node().find(name);
    return a && a->kind == Arg::Kind::kString ? a->s : std::string();
  }
  int64_t dim_arg(const std::string& name, int64_t ndim) const {
    int64_t d = node().arg(name).i;
    return d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
  }

  /// The node's output `i`, or a temporary like `like` when the framework does not use it.
  int output(size_t i, const TensorMeta& like, const std::string& what) {
    const auto& outs = node().outputs;
    if (i < outs.size() && outs[i] >= 0) return outs[i];
    return temp(like, what);
  }
  int temp(const TensorMeta& m, const std::string& what) {
    TensorMeta t = m;
    t.dtype = device::DType::kFp32;
    t.type_name = "float32";
    t.strides = contiguous_strides(t.sizes);
    const int id = out_.graph.add_temporary(t, node().name + "." + what);
    out_.root.push_back(id);
    return id;
  }

  // ---- building one pointwise op ----
  /// Starts an expression; `operand` then adds tensors (or constants) to it.
  void begin() {
    expr_ = Expr{};
    inputs_.clear();
  }
  kernels::Arg operand(const std::string& name) {
    const Arg& a = node().arg(name);
    if (a.kind == Arg::Kind::kTensor) return value(a.value);
    if (a.is_none()) throw NotLowered(name + " is None");
    return kernels::Arg::constant(static_cast<float>(a.as_double()));
  }
  kernels::Arg value(int v) {
    if (!meta(v).fusable()) throw NotLowered("operand " + meta(v).to_string() + " is not fusable");
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i] == v) return kernels::Arg::input(static_cast<int>(i));
    }
    inputs_.push_back(v);
    return kernels::Arg::input(static_cast<int>(inputs_.size()) - 1);
  }
  Expr& e() { return expr_; }
  /// Finishes the expression as op producing `output`.
  void pointwise(int output) {
    if (!meta(output).fusable()) {
      throw NotLowered("result " + meta(output).to_string() + " is not fusable");
    }
    if (expr_.steps.empty()) {
      // A bare operand (clone, cast): copy it.
      throw std::logic_error("pointwise without steps");
    }
    Op op;
    op.kind = Op::Kind::kPointwise;
    op.node = index_;
    op.inputs = inputs_;
    op.output = output;
    op.expr = expr_;
    out_.ops.push_back(std::move(op));
  }
  /// output = a (a copy, possibly broadcasting or casting).
  void copy(int output, kernels::Arg a) {
    if (a.kind == kernels::Arg::kImm) {
      expr_.alu(AluOp::kBypass, a, kernels::Arg::constant(0));
    } else if (meta(output).is_bool()) {
      expr_.alu(AluOp::kNotEqual, a, kernels::Arg::constant(0));
    } else {
      expr_.alu(AluOp::kBypass, a, kernels::Arg::constant(0));
    }
    pointwise(output);
  }

  void reduce(int in, int output, ReduceOp r, std::vector<int64_t> dims, float scale,
              bool nonzero = false) {
    if (!meta(in).fusable() || !meta(output).fusable()) throw NotLowered("reduction of non-float");
    Op op;
    op.kind = Op::Kind::kReduce;
    op.node = index_;
    op.inputs = {in};
    op.output = output;
    op.reduce = r;
    std::sort(dims.begin(), dims.end());
    op.dims = std::move(dims);
    op.scale = scale;
    op.nonzero = nonzero;
    out_.ops.push_back(std::move(op));
  }
  void matmul(int a, int b, int output) {
    if (!meta(a).fusable() || !meta(b).fusable() || meta(a).is_bool()) {
      throw NotLowered("matmul of non-float data");
    }
    Op op;
    op.kind = Op::Kind::kMatmul;
    op.node = index_;
    op.inputs = {a, b};
    op.output = output;
    out_.ops.push_back(std::move(op));
  }
  void attention(std::vector<int> inputs, int output, float scale, bool causal) {
    Op op;
    op.kind = Op::Kind::kAttention;
    op.node = index_;
    op.inputs = std::move(inputs);
    op.output = output;
    op.scale = scale;
    op.causal = causal;
    out_.ops.push_back(std::move(op));
  }
  void view(int in, int output, int root_of) {
    Op op;
    op.kind = Op::Kind::kView;
    op.node = index_;
    op.inputs = {in};
    op.output = output;
    out_.ops.push_back(std::move(op));
    out_.root.at(static_cast<size_t>(output)) = out_.root.at(static_cast<size_t>(root_of));
  }

  /// A meta like `m` with dim `d` of size 1 (a keepdim reduction result).
  static TensorMeta keep(const TensorMeta& m, int64_t d) {
    TensorMeta r = m;
    r.sizes.at(static_cast<size_t>(d)) = 1;
    return r;
  }

 private:
  LoweredGraph& out_;
  int index_;
  Expr expr_;
  std::vector<int> inputs_;
};

using Rule = std::function<void(Lowerer&)>;

// ---- pointwise rules ----

Rule unary_act(ActFunc f, float scale = 1.0f, float bias = 0.0f) {
  return [=](Lowerer& l) {
    l.begin();
    l.e().act(f, l.operand("self"), scale, bias);
    l.pointwise(l.node().outputs.at(0));
  };
}

Rule unary_alu(AluOp op, float imm) {
  return [=](Lowerer& l) {
    l.begin();
    l.e().alu(op, l.operand("self"), kernels::Arg::constant(imm));
    l.pointwise(l.node().outputs.at(0));
  };
}

Rule binary(AluOp op, const char* a = "self", const char* b = "other") {
  return [=](Lowerer& l) {
    l.begin();
    l.e().alu(op, l.operand(a), l.operand(b));
    l.pointwise(l.node().outputs.at(0));
  };
}

Rule add_sub(AluOp op) {
  return [=](Lowerer& l) {
    l.begin();
    const float alpha = static_cast<float>(l.number("alpha", 1.0));
    kernels::Arg b = l.operand("other");
    if (alpha != 1.0f) b = l.e().alu(AluOp::kMultiply, b, kernels::Arg::constant(alpha));
    l.e().alu(op, l.operand("self"), b);
    l.pointwise(l.node().outputs.at(0));
  };
}

// x ** p for a constant p: the exact cases as multiplies and roots, otherwise the ALU's pow.
kernels::Arg power(Expr& e, kernels::Arg x, double p) {
  if (p == 1.0) return e.alu(AluOp::kBypass, x, kernels::Arg::constant(0));
  if (p == 2.0) return e.alu(AluOp::kMultiply, x, x);
  if (p == 3.0) return e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, x, x), x);
  if (p == 0.5) return e.act(ActFunc::kSqrt, x);
  if (p == -0.5) return e.act(ActFunc::kRsqrt, x);
  if (p == -1.0) return e.act(ActFunc::kReciprocal, x);
  if (p == 0.0) return e.alu(AluOp::kBypass, kernels::Arg::constant(1), kernels::Arg::constant(0));
  return e.alu(AluOp::kPow, x, kernels::Arg::constant(static_cast<float>(p)));
}

void pow_rule(Lowerer& l) {
  l.begin();
  const Node& n = l.node();
  const Arg* self = n.find("self");
  const Arg* exponent = n.find("exponent");
  if (self && self->kind != Arg::Kind::kTensor) {
    // scalar ** tensor = exp(ln(scalar) * tensor)
    const double base = self->as_double();
    if (base <= 0) throw NotLowered("pow of a non-positive scalar base");
    l.e().act(ActFunc::kExp, l.operand("exponent"), static_cast<float>(std::log(base)));
  } else if (exponent && exponent->kind != Arg::Kind::kTensor) {
    power(l.e(), l.operand("self"), exponent->as_double());
  } else {
    l.e().alu(AluOp::kPow, l.operand("self"), l.operand("exponent"));
  }
  l.pointwise(n.outputs.at(0));
}

void constant_rule(Lowerer& l, double value) {
  l.begin();
  l.copy(l.node().outputs.at(0), kernels::Arg::constant(static_cast<float>(value)));
}

void copy_rule(Lowerer& l, const char* from) {
  l.begin();
  l.copy(l.node().outputs.at(0), l.operand(from));
}

// ---- composite rules ----

int last_dim(Lowerer& l, int x, const std::string& arg) {
  const int64_t nd = l.meta(x).dim();
  const int64_t d = l.dim_arg(arg, nd);
  if (nd == 0 || d != nd - 1) throw NotLowered("normalises a dim other than the last");
  return static_cast<int>(d);
}

void softmax_rule(Lowerer& l, bool log) {
  const int x = l.tensor("self");
  const int d = last_dim(l, x, "dim");
  const int y = l.node().outputs.at(0);
  const TensorMeta row = Lowerer::keep(l.meta(x), d);
  const int m = l.temp(row, "max");
  l.reduce(x, m, ReduceOp::kMax, {d}, 1.0f);
  const int shifted = l.temp(l.meta(x), "shifted");
  l.begin();
  l.e().alu(AluOp::kSubtract, l.value(x), l.value(m));
  l.pointwise(shifted);
  const int ex = l.temp(l.meta(x), "exp");
  l.begin();
  l.e().act(ActFunc::kExp, l.value(shifted));
  l.pointwise(ex);
  const int s = l.temp(row, "sum");
  l.reduce(ex, s, ReduceOp::kAdd, {d}, 1.0f);
  l.begin();
  if (log) {
    l.e().alu(AluOp::kSubtract, l.value(shifted), l.e().act(ActFunc::kLog, l.value(s)));
  } else {
    l.e().alu(AluOp::kMultiply, l.value(ex), l.e().act(ActFunc::kReciprocal, l.value(s)));
  }
  l.pointwise(y);
}

void softmax_backward_rule(Lowerer& l, bool log) {
  const int g = l.tensor("grad_output");
  const int y = l.tensor("output");
  const int d = last_dim(l, y, "dim");
  const TensorMeta row = Lowerer::keep(l.meta(y), d);
  const int out = l.node().outputs.at(0);
  const int s = l.temp(row, "sum");
  if (log) {
    // g - exp(y) * sum(g)
    l.reduce(g, s, ReduceOp::kAdd, {d}, 1.0f);
    l.begin();
    l.e().alu(AluOp::kSubtract, l.value(g),
              l.e().alu(AluOp::kMultiply, l.e().act(ActFunc::kExp, l.value(y)), l.value(s)));
  } else {
    // y * (g - sum(g * y))
    const int gy = l.temp(l.meta(y), "gy");
    l.begin();
    l.e().alu(AluOp::kMultiply, l.value(g), l.value(y));
    l.pointwise(gy);
    l.reduce(gy, s, ReduceOp::kAdd, {d}, 1.0f);
    l.begin();
    l.e().alu(AluOp::kMultiply, l.value(y), l.e().alu(AluOp::kSubtract, l.value(g), l.value(s)));
  }
  l.pointwise(out);
}

// neuronsim::sdpa (python/neuronsim/compiler/attention.py: what scaled_dot_product_attention and
// the hand-written softmax(q @ k^T * scale) @ v become): one flash attention program.
void attention_rule(Lowerer& l) {
  const int q = l.tensor("q"), k = l.tensor("k"), v = l.tensor("v");
  const int out = l.node().outputs.at(0);
  std::vector<int> inputs{q, k, v};
  if (l.has("attn_mask")) {
    const int m = l.tensor("attn_mask");
    if (l.meta(m).is_bool() || !l.meta(m).fusable()) throw NotLowered("mask is not a float mask");
    inputs.push_back(m);
  }
  const TensorMeta& qm = l.meta(q);
  for (int x : {q, k, v, out}) {
    const TensorMeta& m = l.meta(x);
    if (!m.on_device || m.dim() < 2 || m.dtype != qm.dtype || m.is_bool() ||
        (m.dtype != device::DType::kFp32 && m.dtype != device::DType::kBf16 &&
         m.dtype != device::DType::kFp16)) {
      throw NotLowered("attention operands of one float dtype on the device are needed; got " +
                       m.to_string());
    }
  }
  const int64_t d = qm.sizes.back();
  if (d > 128 || l.meta(v).sizes.back() > 128) throw NotLowered("head dims above 128");
  const double scale = l.number("scale", 1.0 / std::sqrt(static_cast<double>(d)));
  if (!(scale > 0) || !std::isfinite(scale)) throw NotLowered("scale is not positive");
  const Arg& causal = l.node().arg("is_causal");
  l.attention(inputs, out, static_cast<float>(scale), causal.kind == Arg::Kind::kBool && causal.b);
}

void layer_norm_rule(Lowerer& l) {
  const Node& n = l.node();
  const int x = l.tensor("input");
  if (n.arg("normalized_shape").ints.size() != 1) throw NotLowered("normalizes several dims");
  const int64_t nd = l.meta(x).dim();
  const int d = static_cast<int>(nd - 1);
  const float inv_d = 1.0f / static_cast<float>(std::max<int64_t>(1, l.meta(x).sizes.back()));
  const float eps = static_cast<float>(l.number("eps", 1e-5));
  const TensorMeta row = Lowerer::keep(l.meta(x), d);
  const int mean = l.output(1, row, "mean");
  const int rstd = l.output(2, row, "rstd");
  const int y = l.output(0, l.meta(x), "out");
  l.reduce(x, mean, ReduceOp::kAdd, {d}, inv_d);
  const int xc = l.temp(l.meta(x), "centered");
  l.begin();
  l.e().alu(AluOp::kSubtract, l.value(x), l.value(mean));
  l.pointwise(xc);
  const int sq = l.temp(l.meta(x), "square");
  l.begin();
  const kernels::Arg c = l.value(xc);
  l.e().alu(AluOp::kMultiply, c, c);
  l.pointwise(sq);
  const int var = l.temp(row, "var");
  l.reduce(sq, var, ReduceOp::kAdd, {d}, inv_d);
  l.begin();
  l.e().act(ActFunc::kRsqrt, l.value(var), 1.0f, eps);
  l.pointwise(rstd);
  l.begin();
  kernels::Arg r = l.e().alu(AluOp::kMultiply, l.value(xc), l.value(rstd));
  if (l.has("weight")) r = l.e().alu(AluOp::kMultiply, r, l.operand("weight"));
  if (l.has("bias")) r = l.e().alu(AluOp::kAdd, r, l.operand("bias"));
  if (!l.has("weight") && !l.has("bias"))
    r = l.e().alu(AluOp::kBypass, r, kernels::Arg::constant(0));
  l.pointwise(y);
}

void reduce_rule(Lowerer& l, ReduceOp r, bool mean, bool nonzero = false) {
  const int x = l.tensor("self");
  const TensorMeta& m = l.meta(x);
  std::vector<int64_t> dims;
  const Arg* dim = l.node().find("dim");
  if (dim && dim->kind == Arg::Kind::kInts) {
    for (int64_t d : dim->ints) dims.push_back(d < 0 ? d + std::max<int64_t>(m.dim(), 1) : d);
  } else if (dim && dim->kind == Arg::Kind::kInt) {
    dims.push_back(dim->i < 0 ? dim->i + std::max<int64_t>(m.dim(), 1) : dim->i);
  }
  if (dims.empty() || m.dim() == 0) {
    dims.clear();
    for (int64_t d = 0; d < m.dim(); ++d) dims.push_back(d);
  }
  if (l.has("dtype") && l.str("dtype").empty()) {
    // dtype= given as a non-string: the framework side passes dtypes as strings.
    throw NotLowered("dtype argument");
  }
  uint64_t count = 1;
  for (int64_t d : dims) count *= static_cast<uint64_t>(m.sizes.at(static_cast<size_t>(d)));
  const float scale = mean ? 1.0f / static_cast<float>(std::max<uint64_t>(count, 1)) : 1.0f;
  l.reduce(x, l.node().outputs.at(0), r, dims, scale, nonzero);
}

void addmm_rule(Lowerer& l, const char* a, const char* b) {
  const int out = l.node().outputs.at(0);
  const int prod = l.temp(l.meta(out), "mm");
  l.matmul(l.tensor(a), l.tensor(b), prod);
  const float alpha = static_cast<float>(l.number("alpha", 1.0));
  const float beta = static_cast<float>(l.number("beta", 1.0));
  l.begin();
  kernels::Arg p = l.value(prod);
  if (alpha != 1.0f) p = l.e().alu(AluOp::kMultiply, p, kernels::Arg::constant(alpha));
  if (beta != 0.0f) {
    kernels::Arg c = l.operand("self");
    if (beta != 1.0f) c = l.e().alu(AluOp::kMultiply, c, kernels::Arg::constant(beta));
    l.e().alu(AluOp::kAdd, p, c);
  } else if (alpha == 1.0f) {
    l.e().alu(AluOp::kBypass, p, kernels::Arg::constant(0));
  }
  l.pointwise(out);
}

// _foreach_<op>: the per-tensor op on every list element; `scalar_of(i)` gives a Scalar/ScalarList
// operand, `other` a tensor-list operand.
void foreach_rule(Lowerer& l,
                  const std::function<kernels::Arg(Expr&, kernels::Arg self,
                                                   const std::vector<kernels::Arg>&)>& fn,
                  const std::vector<std::string>& extra) {
  const Node& n = l.node();
  const Arg& self = n.arg("self");
  if (self.kind != Arg::Kind::kTensors) throw NotLowered("self is not a tensor list");
  for (size_t i = 0; i < self.values.size(); ++i) {
    if (i >= n.outputs.size() || n.outputs[i] < 0) continue;  // an unused result
    l.begin();
    std::vector<kernels::Arg> more;
    for (const auto& spec : extra) {
      // "a|b" names alternatives (the overloads name their operand differently), "x=1" a
      // default for an argument only some overloads have.
      const Arg* found = nullptr;
      std::string rest = spec, fallback;
      if (auto eq = rest.find('='); eq != std::string::npos) {
        fallback = rest.substr(eq + 1);
        rest = rest.substr(0, eq);
      }
      for (size_t b = 0; !found;) {
        const size_t e = rest.find('|', b);
        found = n.find(rest.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
      }
      if (!found || found->is_none()) {
        if (fallback.empty()) throw NotLowered(spec + " is missing");
        more.push_back(kernels::Arg::constant(std::stof(fallback)));
        continue;
      }
      const Arg& a = *found;
      switch (a.kind) {
        case Arg::Kind::kTensors:
          more.push_back(l.value(a.values.at(i)));
          break;
        case Arg::Kind::kTensor:
          more.push_back(l.value(a.value));
          break;
        case Arg::Kind::kFloats:
          more.push_back(kernels::Arg::constant(static_cast<float>(a.floats.at(i))));
          break;
        case Arg::Kind::kInts:
          more.push_back(kernels::Arg::constant(static_cast<float>(a.ints.at(i))));
          break;
        default:
          more.push_back(kernels::Arg::constant(static_cast<float>(a.as_double())));
      }
    }
    fn(l.e(), l.value(self.values[i]), more);
    l.pointwise(n.outputs[i]);
  }
}

const char* const kViewOps[] = {"aten::view",      "aten::_unsafe_view", "aten::reshape",
                                "aten::permute",   "aten::transpose",    "aten::t",
                                "aten::expand",    "aten::unsqueeze",    "aten::squeeze",
                                "aten::slice",     "aten::select",       "aten::alias",
                                "aten::detach",    "aten::as_strided",   "aten::view_as",
                                "aten::expand_as", "aten::unfold",       "aten::diagonal"};

bool is_view_op(const std::string& op) {
  for (const char* v : kViewOps) {
    if (op == v) return true;
  }
  return false;
}

std::unordered_map<std::string, Rule> make_rules() {
  std::unordered_map<std::string, Rule> r;
  using K = kernels::Arg;
  // Unary functions (ScalarE).
  r["aten::exp"] = unary_act(ActFunc::kExp);
  r["aten::log"] = unary_act(ActFunc::kLog);
  r["aten::sqrt"] = unary_act(ActFunc::kSqrt);
  r["aten::rsqrt"] = unary_act(ActFunc::kRsqrt);
  r["aten::sigmoid"] = unary_act(ActFunc::kSigmoid);
  r["aten::tanh"] = unary_act(ActFunc::kTanh);
  r["aten::erf"] = unary_act(ActFunc::kErf);
  r["aten::sin"] = unary_act(ActFunc::kSin);
  r["aten::cos"] = unary_act(ActFunc::kCos);
  r["aten::reciprocal"] = unary_act(ActFunc::kReciprocal);
  r["aten::sign"] = unary_act(ActFunc::kSign);
  r["aten::silu"] = unary_act(ActFunc::kSilu);
  r["aten::mish"] = unary_act(ActFunc::kMish);
  r["aten::log1p"] = unary_act(ActFunc::kLog, 1.0f, 1.0f);
  r["aten::exp2"] = unary_act(ActFunc::kExp, 0.6931471805599453f);
  r["aten::expm1"] = [](Lowerer& l) {
    l.begin();
    l.e().alu(AluOp::kSubtract, l.e().act(ActFunc::kExp, l.operand("self")), K::constant(1));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::gelu"] = [](Lowerer& l) {
    l.begin();
    l.e().act(l.str("approximate") == "tanh" ? ActFunc::kGeluTanh : ActFunc::kGelu,
              l.operand("self"));
    l.pointwise(l.node().outputs.at(0));
  };
  // Unary ALU ops (VectorE).
  r["aten::abs"] = unary_alu(AluOp::kAbsMax, 0.0f);
  r["aten::neg"] = unary_alu(AluOp::kMultiply, -1.0f);
  r["aten::relu"] = unary_alu(AluOp::kMax, 0.0f);
  r["aten::logical_not"] = unary_alu(AluOp::kIsEqual, 0.0f);
  r["aten::isnan"] = [](Lowerer& l) {
    l.begin();
    const K x = l.operand("self");
    l.e().alu(AluOp::kNotEqual, x, x);
    l.pointwise(l.node().outputs.at(0));
  };
  // Binary arithmetic and comparisons.
  r["aten::add"] = add_sub(AluOp::kAdd);
  r["aten::sub"] = add_sub(AluOp::kSubtract);
  r["aten::rsub"] = [](Lowerer& l) {
    l.begin();
    const float alpha = static_cast<float>(l.number("alpha", 1.0));
    K a = l.operand("self");
    if (alpha != 1.0f) a = l.e().alu(AluOp::kMultiply, a, K::constant(alpha));
    l.e().alu(AluOp::kSubtract, l.operand("other"), a);
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::mul"] = binary(AluOp::kMultiply);
  r["aten::div"] = [](Lowerer& l) {
    if (!l.str("rounding_mode").empty()) throw NotLowered("rounding division");
    l.begin();
    l.e().alu(AluOp::kDivide, l.operand("self"), l.operand("other"));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::maximum"] = binary(AluOp::kMax);
  r["aten::minimum"] = binary(AluOp::kMin);
  r["aten::eq"] = binary(AluOp::kIsEqual);
  r["aten::ne"] = binary(AluOp::kNotEqual);
  r["aten::lt"] = binary(AluOp::kIsLt);
  r["aten::le"] = binary(AluOp::kIsLe);
  r["aten::gt"] = binary(AluOp::kIsGt);
  r["aten::ge"] = binary(AluOp::kIsGe);
  r["aten::logical_and"] = binary(AluOp::kLogicalAnd);
  r["aten::logical_or"] = binary(AluOp::kLogicalOr);
  r["aten::logical_xor"] = binary(AluOp::kLogicalXor);
  r["aten::pow"] = pow_rule;
  r["aten::clamp"] = [](Lowerer& l) {
    l.begin();
    K x = l.operand("self");
    bool any = false;
    if (l.has("min")) x = l.e().alu(AluOp::kMax, x, l.operand("min")), any = true;
    if (l.has("max")) x = l.e().alu(AluOp::kMin, x, l.operand("max")), any = true;
    if (!any) l.e().alu(AluOp::kBypass, x, K::constant(0));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::clamp_min"] = binary(AluOp::kMax, "self", "min");
  r["aten::clamp_max"] = binary(AluOp::kMin, "self", "max");
  r["aten::where"] = [](Lowerer& l) {
    l.begin();
    l.e().select(l.operand("condition"), l.operand("self"), l.operand("other"));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::masked_fill"] = [](Lowerer& l) {
    l.begin();
    const K x = l.operand("self");
    l.e().select(l.operand("mask"), l.operand("value"), x);
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::lerp"] = [](Lowerer& l) {
    l.begin();
    const K a = l.operand("self"), b = l.operand("end");
    l.e().alu(AluOp::kAdd, a,
              l.e().alu(AluOp::kMultiply, l.operand("weight"), l.e().alu(AluOp::kSubtract, b, a)));
    l.pointwise(l.node().outputs.at(0));
  };
  r["prims::fma"] = [](Lowerer& l) {  // a * b + c (aten::lerp's decomposition)
    l.begin();
    l.e().alu(AluOp::kAdd, l.e().alu(AluOp::kMultiply, l.operand("a"), l.operand("b")),
              l.operand("c"));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::addcmul"] = [](Lowerer& l) {
    l.begin();
    const K t = l.e().alu(AluOp::kMultiply, l.operand("tensor1"), l.operand("tensor2"));
    l.e().alu(AluOp::kAdd, l.operand("self"), l.e().alu(AluOp::kMultiply, t, l.operand("value")));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::addcdiv"] = [](Lowerer& l) {
    l.begin();
    const K t = l.e().alu(AluOp::kDivide, l.operand("tensor1"), l.operand("tensor2"));
    l.e().alu(AluOp::kAdd, l.operand("self"), l.e().alu(AluOp::kMultiply, t, l.operand("value")));
    l.pointwise(l.node().outputs.at(0));
  };
  // Backward kernels.
  r["aten::threshold_backward"] = [](Lowerer& l) {
    l.begin();
    l.e().select(l.e().alu(AluOp::kIsGt, l.operand("self"), l.operand("threshold")),
                 l.operand("grad_output"), K::constant(0));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::gelu_backward"] = [](Lowerer& l) {
    if (l.str("approximate") == "tanh") throw NotLowered("tanh-approximated gelu_backward");
    l.begin();
    l.e().alu(AluOp::kMultiply, l.operand("grad_output"),
              l.e().act(ActFunc::kGeluDx, l.operand("self")));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::silu_backward"] = [](Lowerer& l) {
    l.begin();
    l.e().alu(AluOp::kMultiply, l.operand("grad_output"),
              l.e().act(ActFunc::kSiluDx, l.operand("self")));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::sigmoid_backward"] = [](Lowerer& l) {
    l.begin();
    const K y = l.operand("output");
    l.e().alu(AluOp::kMultiply, l.operand("grad_output"),
              l.e().alu(AluOp::kMultiply, y, l.e().alu(AluOp::kSubtract, K::constant(1), y)));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::tanh_backward"] = [](Lowerer& l) {
    l.begin();
    const K y = l.operand("output");
    l.e().alu(AluOp::kMultiply, l.operand("grad_output"),
              l.e().alu(AluOp::kSubtract, K::constant(1), l.e().alu(AluOp::kMultiply, y, y)));
    l.pointwise(l.node().outputs.at(0));
  };
  r["aten::native_dropout_backward"] = [](Lowerer& l) {
    l.begin();
    l.e().alu(AluOp::kMultiply,
              l.e().alu(AluOp::kMultiply, l.operand("grad_output"), l.operand("mask")),
              l.operand("scale"));
    l.pointwise(l.node().outputs.at(0));
  };
  // Copies, casts and constants.
  r["aten::clone"] = [](Lowerer& l) { copy_rule(l, "self"); };
  r["aten::_to_copy"] = [](Lowerer& l) { copy_rule(l, "self"); };
  r["aten::copy"] = [](Lowerer& l) { copy_rule(l, "src"); };
  r["aten::lift_fresh_copy"] = [](Lowerer& l) { copy_rule(l, "self"); };
  r["aten::copy_"] = [](Lowerer& l) {
    // An in-place copy into a graph input (kept input mutations): the result lives in `self`.
    l.begin();
    const int out = l.node().outputs.at(0);
    l.copy(out, l.operand("src"));
  };
  r["aten::fill"] = [](Lowerer& l) { constant_rule(l, l.number("value", 0.0)); };
  r["aten::full"] = [](Lowerer& l) { constant_rule(l, l.number("fill_value", 0.0)); };
  r["aten::full_like"] = [](Lowerer& l) { constant_rule(l, l.number("fill_value", 0.0)); };
  r["aten::scalar_tensor"] = [](Lowerer& l) { constant_rule(l, l.number("s", 0.0)); };
  r["aten::zeros"] = [](Lowerer& l) { constant_rule(l, 0.0); };
  r["aten::zeros_like"] = [](Lowerer& l) { constant_rule(l, 0.0); };
  r["aten::ones"] = [](Lowerer& l) { constant_rule(l, 1.0); };
  r["aten::ones_like"] = [](Lowerer& l) { constant_rule(l, 1.0); };
  // Reductions.
  r["aten::sum"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kAdd, false); };
  r["aten::mean"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kAdd, true); };
  r["aten::amax"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kMax, false); };
  r["aten::amin"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kMin, false); };
  r["aten::prod"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kMultiply, false); };
  r["aten::any"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kMax, false, true); };
  r["aten::all"] = [](Lowerer& l) { reduce_rule(l, ReduceOp::kMin, false, true); };
  // Normalisations.
  r["aten::_softmax"] = [](Lowerer& l) { softmax_rule(l, false); };
  r["aten::_log_softmax"] = [](Lowerer& l) { softmax_rule(l, true); };
  r["aten::_softmax_backward_data"] = [](Lowerer& l) { softmax_backward_rule(l, false); };
  r["aten::_log_softmax_backward_data"] = [](Lowerer& l) { softmax_backward_rule(l, true); };
  r["aten::native_layer_norm"] = layer_norm_rule;
  r["neuronsim::sdpa"] = attention_rule;
  // Matmuls.
  r["aten::mm"] = [](Lowerer& l) {
    l.matmul(l.tensor("self"), l.tensor("mat2"), l.node().outputs.at(0));
  };
  r["aten::bmm"] = r["aten::mm"];
  r["aten::addmm"] = [](Lowerer& l) { addmm_rule(l, "mat1", "mat2"); };
  r["aten::baddbmm"] = [](Lowerer& l) { addmm_rule(l, "batch1", "batch2"); };
  // Views: metadata only; the output's meta is its layout.
  for (const char* v : kViewOps) {
    r[v] = [](Lowerer& l) {
      const Node& n = l.node();
      const int in = n.args.at(0).second.value;
      if (n.args.at(0).second.kind != Arg::Kind::kTensor) throw NotLowered("view of a non-tensor");
      l.view(in, n.outputs.at(0), in);
    };
  }
  // _foreach ops (optimizers): one pointwise op per list element.
  using Fn = std::function<K(Expr&, K, const std::vector<K>&)>;
  auto per_tensor = [&](const char* name, std::vector<std::string> extra, Fn fn) {
    r[name] = [extra, fn](Lowerer& l) { foreach_rule(l, fn, extra); };
  };
  per_tensor("aten::_foreach_add", {"other|scalar|scalars", "alpha=1"},
             [](Expr& e, K x, const std::vector<K>& m) {
               return e.alu(AluOp::kAdd, x, e.alu(AluOp::kMultiply, m[0], m[1]));
             });
  per_tensor("aten::_foreach_sub", {"other|scalar|scalars", "alpha=1"},
             [](Expr& e, K x, const std::vector<K>& m) {
               return e.alu(AluOp::kSubtract, x, e.alu(AluOp::kMultiply, m[0], m[1]));
             });
  per_tensor(
      "aten::_foreach_mul", {"other|scalar|scalars"},
      [](Expr& e, K x, const std::vector<K>& m) { return e.alu(AluOp::kMultiply, x, m[0]); });
  per_tensor("aten::_foreach_div", {"other|scalar|scalars"},
             [](Expr& e, K x, const std::vector<K>& m) { return e.alu(AluOp::kDivide, x, m[0]); });
  per_tensor("aten::_foreach_maximum", {"other|scalar|scalars"},
             [](Expr& e, K x, const std::vector<K>& m) { return e.alu(AluOp::kMax, x, m[0]); });
  per_tensor("aten::_foreach_sqrt", {},
             [](Expr& e, K x, const std::vector<K>&) { return e.act(ActFunc::kSqrt, x); });
  per_tensor("aten::_foreach_neg", {}, [](Expr& e, K x, const std::vector<K>&) {
    return e.alu(AluOp::kMultiply, x, K::constant(-1));
  });
  per_tensor("aten::_foreach_reciprocal", {},
             [](Expr& e, K x, const std::vector<K>&) { return e.act(ActFunc::kReciprocal, x); });
  per_tensor("aten::_foreach_addcmul", {"tensor1", "tensor2", "value|scalars"},
             [](Expr& e, K x, const std::vector<K>& m) {
               return e.alu(AluOp::kAdd, x,
                            e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, m[0], m[1]), m[2]));
             });
  per_tensor("aten::_foreach_addcdiv", {"tensor1", "tensor2", "value|scalars"},
             [](Expr& e, K x, const std::vector<K>& m) {
               return e.alu(AluOp::kAdd, x,
                            e.alu(AluOp::kMultiply, e.alu(AluOp::kDivide, m[0], m[1]), m[2]));
             });
  per_tensor("aten::_foreach_lerp", {"tensors1", "weight|weights"},
             [](Expr& e, K x, const std::vector<K>& m) {
               return e.alu(AluOp::kAdd, x,
                            e.alu(AluOp::kMultiply, m[1], e.alu(AluOp::kSubtract, m[0], x)));
             });
  return r;
}

// _foreach_pow.ScalarAndTensor(Scalar self, Tensor[] exponent): self is the scalar.
void foreach_pow_rule(Lowerer& l) {
  const Node& n = l.node();
  const Arg& self = n.arg("self");
  const Arg& ex = n.arg("exponent");
  if (self.kind == Arg::Kind::kTensors) {
    for (size_t i = 0; i < self.values.size(); ++i) {
      if (i >= n.outputs.size() || n.outputs[i] < 0) continue;
      l.begin();
      const kernels::Arg x = l.value(self.values[i]);
      if (ex.kind == Arg::Kind::kTensors) {
        l.e().alu(AluOp::kPow, x, l.value(ex.values.at(i)));
      } else if (ex.kind == Arg::Kind::kFloats) {
        power(l.e(), x, ex.floats.at(i));
      } else {
        power(l.e(), x, ex.as_double());
      }
      l.pointwise(n.outputs[i]);
    }
    return;
  }
  if (ex.kind != Arg::Kind::kTensors) throw NotLowered("_foreach_pow arguments");
  const double base = self.as_double();
  if (base <= 0) throw NotLowered("pow of a non-positive scalar base");
  for (size_t i = 0; i < ex.values.size(); ++i) {
    if (i >= n.outputs.size() || n.outputs[i] < 0) continue;
    l.begin();
    l.e().act(ActFunc::kExp, l.value(ex.values[i]), static_cast<float>(std::log(base)));
    l.pointwise(n.outputs[i]);
  }
}

const std::unordered_map<std::string, Rule>& rules() {
  static const auto r = [] {
    auto m = make_rules();
    m["aten::_foreach_pow"] = foreach_pow_rule;
    return m;
  }();
  return r;
}

}  // namespace

LoweredGraph lower(const Graph& g, const std::vector<bool>& opaque_nodes) {
  LoweredGraph out;
  out.graph = g;
  out.root.resize(g.values().size());
  for (size_t v = 0; v < out.root.size(); ++v) out.root[v] = static_cast<int>(v);
  const auto& table = rules();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const size_t first_op = out.ops.size();
    const size_t values_before = out.graph.values().size();
    std::string reason;
    auto it = table.find(n.op);
    // Views stay metadata even when a region around them failed: there is nothing to run.
    const bool forced = i < opaque_nodes.size() && opaque_nodes[i] && !is_view_op(n.op);
    if (forced) {
      reason = "its parts do not fit one fused program";
    } else if (it == table.end()) {
      reason = "no lowering for " + n.op;
    } else {
      try {
        Lowerer l(out, static_cast<int>(i));
        it->second(l);
        if (n.op == "aten::copy_" && n.find("self") && n.arg("self").kind == Arg::Kind::kTensor) {
          // The copy's result is the destination's memory.
          out.root.at(static_cast<size_t>(n.outputs.at(0))) =
              out.root.at(static_cast<size_t>(n.arg("self").value));
        }
        continue;
      } catch (const NotLowered& e) {
        reason = e.what();
      } catch (const std::invalid_argument& e) {
        reason = e.what();
      } catch (const std::out_of_range& e) {
        reason = std::string("unexpected arguments: ") + e.what();
      }
    }
    // Opaque: drop any partial lowering and keep the node whole.
    out.ops.resize(first_op);
    (void)values_before;  // temporaries of a failed lowering stay unused
    Op op;
    op.kind = Op::Kind::kOpaque;
    op.node = static_cast<int>(i);
    for (const auto& [name, a] : n.args) {
      if (a.kind == Arg::Kind::kTensor && a.value >= 0) op.inputs.push_back(a.value);
      if (a.kind == Arg::Kind::kTensors) {
        for (int v : a.values) {
          if (v >= 0) op.inputs.push_back(v);
        }
      }
    }
    op.reason = reason;
    out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace neuronsim::kernels::graph
