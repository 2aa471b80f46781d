// The _foreach_* ops torch.optim's foreach paths and clip_grad_norm_ use: eagerly one
// multi-tensor program over the whole list (kernels/multi_tensor.h), as multi_tensor_apply does
// on CUDA; in compiled graphs one pointwise op per list element, which the compiler groups into
// one multi-tensor program again.
#include <cmath>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/multi_tensor.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;
using device_model::ReduceOp;
using graph::Lowerer;

// One foreach call as multi-tensor groups: group i holds the i-th tensor of every list.
class Foreach {
 public:
  explicit Foreach(const OpCall& call) : call_(call) {
    const char* lead = call.kind("self") == ArgKind::kTensors ? "self" : "exponent";
    n_ = call.tensors(lead).size();
    groups_.resize(n_);
  }

  /// A Tensor[] argument, element by element.
  MtArg list(const std::string& name) {
    const std::vector<TensorArg> l = call_.tensors(name);
    if (l.size() != n_) {
      throw std::invalid_argument(fmt::format("neuronsim: {}: list {} has {} tensors, expected {}",
                                              call_.name(), name, l.size(), n_));
    }
    for (size_t i = 0; i < n_; ++i) groups_[i].tensors.push_back(l[i].desc);
    integer_ &= all_integral(l);
    return MtArg::tensor(static_cast<int>(groups_[0].tensors.size()) - 1);
  }

  /// A Scalar, Scalar[] (one per tensor), Tensor (one-element, shared) or Tensor[] argument.
  MtArg value(const std::string& name, float fallback = 0.0f) {
    switch (call_.kind(name)) {
      case ArgKind::kAbsent:
      case ArgKind::kNone:
        return MtArg::constant(fallback);
      case ArgKind::kTensors:
        return list(name);
      case ArgKind::kTensor: {
        const TensorArg t = call_.tensor(name);
        if (!t.on_device) return MtArg::constant(static_cast<float>(call_.number(name, 0)));
        for (auto& g : groups_) g.scalars.push_back(t.desc);
        integer_ &= t.is_integral(true);
        return MtArg::scalar(static_cast<int>(groups_.empty() ? 0 : groups_[0].scalars.size() - 1));
      }
      case ArgKind::kInts:
      case ArgKind::kFloats: {  // Scalar[]: a constant per group
        const std::vector<double> l = call_.numbers(name);
        if (l.size() != n_) {
          throw std::invalid_argument(fmt::format("neuronsim: {}: {} has {} scalars, expected {}",
                                                  call_.name(), name, l.size(), n_));
        }
        for (size_t i = 0; i < n_; ++i) groups_[i].params.push_back(static_cast<float>(l[i]));
        integer_ &= call_.kind(name) == ArgKind::kInts;
        return MtArg::param(static_cast<int>(groups_.empty() ? 0 : groups_[0].params.size() - 1));
      }
      default:
        integer_ &= call_.kind(name) == ArgKind::kInt;
        return MtArg::constant(static_cast<float>(call_.number(name, fallback)));
    }
  }

  /// The value to write into each output tensor (in place: self; out=: out; else the returns).
  Programs store(MtArg value) {
    const std::vector<TensorArg> outs = outputs();
    for (size_t i = 0; i < n_; ++i) groups_[i].outputs.push_back(outs.at(i).desc);
    integer_ &= all_integral(outs);
    e.stores.push_back({value, 0});
    return build();
  }

  /// A per-tensor result (norm, max): one-element outputs.
  Programs store_scalar(MtArg value) {
    const std::vector<TensorArg> outs = outputs();
    for (size_t i = 0; i < n_; ++i) groups_[i].scalar_outputs.push_back(outs.at(i).desc);
    e.scalar_stores.push_back({value, 0});
    return build();
  }

  /// The second operand of a binary foreach op, whatever its overload calls it.
  MtArg other() {
    for (const char* n : {"other", "scalar", "scalars", "exponent", "weight", "weights"}) {
      if (call_.in_schema(n)) return value(n);
    }
    throw std::invalid_argument("neuronsim: " + call_.name() + " has no second operand");
  }
  bool self_is_list() const { return call_.kind("self") == ArgKind::kTensors; }
  bool in_schema(const std::string& name) const { return call_.in_schema(name); }
  double number(const std::string& name, double fallback) const {
    return call_.number(name, fallback);
  }

  MtExpr e;

 private:
  std::vector<TensorArg> outputs() const {
    if (call_.name().back() == '_') return call_.tensors("self");
    if (call_.in_schema("out")) return call_.tensors("out");
    std::vector<TensorArg> outs;
    for (size_t i = 0; i < call_.num_outputs(); ++i) outs.push_back(call_.output(i));
    return outs;
  }

  static bool all_integral(const std::vector<TensorArg>& l) {
    for (const TensorArg& t : l) {
      if (!t.is_integral(true)) return false;
    }
    return true;
  }

  Programs build() {
    e.integer = integer_ && e.reductions.empty();
    return {build_multi_tensor(call_.name(), groups_, e, call_.core())};
  }

  const OpCall& call_;
  size_t n_ = 0;
  std::vector<MtGroup> groups_;
  bool integer_ = true;
};

using ForeachFn = std::function<Programs(Foreach&)>;

void reg(std::vector<OpRule>& ops, const std::string& name, ForeachFn fn) {
  OpRule r;
  r.name = name;
  r.build = [fn](const OpCall& call) {
    Foreach f(call);
    return fn(f);
  };
  ops.push_back(std::move(r));
}

// x * alpha, skipping alpha == 1.
MtArg scaled(MtExpr& e, MtArg x, MtArg alpha) {
  if (alpha.kind == MtArg::kImm && alpha.imm == 1.0f) return x;
  return e.alu(AluOp::kMultiply, x, alpha);
}

// _foreach_<op>: the per-tensor op on every list element; `scalar_of(i)` gives a Scalar/ScalarList
// operand, `other` a tensor-list operand.
void lower_foreach(Lowerer& l,
                   const std::function<Arg(Expr&, Arg self, const std::vector<Arg>&)>& fn,
                   const std::vector<std::string>& extra) {
  const graph::Node& n = l.node();
  const graph::Arg& self = n.arg("self");
  if (self.kind != graph::Arg::Kind::kTensors) throw graph::NotLowered("self is not a tensor list");
  for (size_t i = 0; i < self.values.size(); ++i) {
    if (i >= n.outputs.size() || n.outputs[i] < 0) continue;  // an unused result
    l.begin();
    std::vector<Arg> more;
    for (const auto& spec : extra) {
      // "a|b" names alternatives (the overloads name their operand differently), "x=1" a
      // default for an argument only some overloads have.
      const graph::Arg* found = nullptr;
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
        if (fallback.empty()) throw graph::NotLowered(spec + " is missing");
        more.push_back(Arg::constant(std::stof(fallback)));
        continue;
      }
      const graph::Arg& a = *found;
      switch (a.kind) {
        case graph::Arg::Kind::kTensors:
          more.push_back(l.value(a.values.at(i)));
          break;
        case graph::Arg::Kind::kTensor:
          more.push_back(l.value(a.value));
          break;
        case graph::Arg::Kind::kFloats:
          more.push_back(Arg::constant(static_cast<float>(a.floats.at(i))));
          break;
        case graph::Arg::Kind::kInts:
          more.push_back(Arg::constant(static_cast<float>(a.ints.at(i))));
          break;
        default:
          more.push_back(Arg::constant(static_cast<float>(a.as_double())));
      }
    }
    fn(l.e(), l.value(self.values[i]), more);
    l.pointwise(n.outputs[i]);
  }
}

// _foreach_pow.ScalarAndTensor(Scalar self, Tensor[] exponent): self is the scalar.
void lower_foreach_pow(Lowerer& l) {
  const graph::Node& n = l.node();
  const graph::Arg& self = n.arg("self");
  const graph::Arg& ex = n.arg("exponent");
  if (self.kind == graph::Arg::Kind::kTensors) {
    for (size_t i = 0; i < self.values.size(); ++i) {
      if (i >= n.outputs.size() || n.outputs[i] < 0) continue;
      l.begin();
      const Arg x = l.value(self.values[i]);
      if (ex.kind == graph::Arg::Kind::kTensors) {
        l.e().alu(AluOp::kPow, x, l.value(ex.values.at(i)));
      } else if (ex.kind == graph::Arg::Kind::kFloats) {
        constant_power(l.e(), x, ex.floats.at(i));
      } else {
        constant_power(l.e(), x, ex.as_double());
      }
      l.pointwise(n.outputs[i]);
    }
    return;
  }
  if (ex.kind != graph::Arg::Kind::kTensors) throw graph::NotLowered("_foreach_pow arguments");
  const double base = self.as_double();
  if (base <= 0) throw graph::NotLowered("pow of a non-positive scalar base");
  for (size_t i = 0; i < ex.values.size(); ++i) {
    if (i >= n.outputs.size() || n.outputs[i] < 0) continue;
    l.begin();
    l.e().act(ActFunc::kExp, l.value(ex.values[i]), static_cast<float>(std::log(base)));
    l.pointwise(n.outputs[i]);
  }
}

// The per-tensor expression of each foreach op a compiled optimizer step uses, by name.
std::unordered_map<std::string, std::function<void(Lowerer&)>> graph_lowerings() {
  std::unordered_map<std::string, std::function<void(Lowerer&)>> r;
  using K = Arg;
  // _foreach ops (optimizers): one pointwise op per list element.
  using Fn = std::function<K(Expr&, K, const std::vector<K>&)>;
  auto per_tensor = [&](const char* name, std::vector<std::string> extra, Fn fn) {
    r[name] = [extra, fn](Lowerer& l) { lower_foreach(l, fn, extra); };
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
  r["aten::_foreach_pow"] = lower_foreach_pow;
  return r;
}

}  // namespace

std::vector<OpRule> foreach_rules() {
  std::vector<OpRule> ops;
  // Unary functions.
  struct Unary {
    const char* name;
    std::function<MtArg(MtExpr&, MtArg)> fn;
  };
  auto act = [](ActFunc f, float scale = 1.0f, float bias = 0.0f) {
    return [=](MtExpr& e, MtArg x) { return e.act(f, x, scale, bias); };
  };
  const Unary unary[] = {
      {"aten::_foreach_sqrt", act(ActFunc::kSqrt)},
      {"aten::_foreach_rsqrt", act(ActFunc::kRsqrt)},
      {"aten::_foreach_exp", act(ActFunc::kExp)},
      {"aten::_foreach_log", act(ActFunc::kLog)},
      {"aten::_foreach_log1p", act(ActFunc::kLog, 1.0f, 1.0f)},
      {"aten::_foreach_sigmoid", act(ActFunc::kSigmoid)},
      {"aten::_foreach_tanh", act(ActFunc::kTanh)},
      {"aten::_foreach_erf", act(ActFunc::kErf)},
      {"aten::_foreach_sin", act(ActFunc::kSin)},
      {"aten::_foreach_cos", act(ActFunc::kCos)},
      {"aten::_foreach_sign", act(ActFunc::kSign)},
      {"aten::_foreach_reciprocal", act(ActFunc::kReciprocal)},
      {"aten::_foreach_expm1",
       [](MtExpr& e, MtArg x) {
         return e.alu(AluOp::kSubtract, e.act(ActFunc::kExp, x), MtArg::constant(1));
       }},
      {"aten::_foreach_log2",
       [](MtExpr& e, MtArg x) {
         return e.alu(AluOp::kMultiply, e.act(ActFunc::kLog, x),
                      MtArg::constant(1.4426950408889634f));
       }},
      {"aten::_foreach_abs",
       [](MtExpr& e, MtArg x) { return e.alu(AluOp::kAbsMax, x, MtArg::constant(0)); }},
      {"aten::_foreach_neg",
       [](MtExpr& e, MtArg x) { return e.alu(AluOp::kMultiply, x, MtArg::constant(-1)); }},
      {"aten::_foreach_trunc",
       [](MtExpr& e, MtArg x) {
         return e.alu(AluOp::kSubtract, x, e.alu(AluOp::kMod, x, MtArg::constant(1)));
       }},
      {"aten::_foreach_frac",
       [](MtExpr& e, MtArg x) { return e.alu(AluOp::kMod, x, MtArg::constant(1)); }},
  };
  for (const Unary& u : unary) {
    auto fn = u.fn;
    reg(ops, u.name, [fn](Foreach& f) {
      const MtArg x = f.list("self");
      return f.store(fn(f.e, x));
    });
  }
  reg(ops, "aten::_foreach_zero", [](Foreach& f) { return f.store(MtArg::constant(0)); });
  reg(ops, "aten::_foreach_copy", [](Foreach& f) { return f.store(f.list("src")); });
  reg(ops, "aten::_foreach_clone", [](Foreach& f) { return f.store(f.list("self")); });

  // Binary ops: list op (list | scalar | scalar list | shared tensor).
  struct Binary {
    const char* name;
    AluOp op;
  };
  for (const Binary& b : {Binary{"aten::_foreach_mul", AluOp::kMultiply},
                          {"aten::_foreach_div", AluOp::kDivide},
                          {"aten::_foreach_maximum", AluOp::kMax},
                          {"aten::_foreach_minimum", AluOp::kMin},
                          {"aten::_foreach_clamp_min", AluOp::kMax},
                          {"aten::_foreach_clamp_max", AluOp::kMin}}) {
    const AluOp op = b.op;
    const std::string name = b.name;
    reg(ops, name, [op](Foreach& f) {
      const MtArg x = f.list("self");
      return f.store(f.e.alu(op, x, f.other()));
    });
  }
  for (const char* n : {"aten::_foreach_add", "aten::_foreach_sub"}) {
    const AluOp op = std::string(n) == "aten::_foreach_add" ? AluOp::kAdd : AluOp::kSubtract;
    reg(ops, n, [op](Foreach& f) {
      const MtArg x = f.list("self");
      const MtArg y = f.other();
      const MtArg alpha = f.value("alpha", 1.0f);
      return f.store(f.e.alu(op, x, scaled(f.e, y, alpha)));
    });
  }
  reg(ops, "aten::_foreach_pow", [](Foreach& f) {
    if (!f.self_is_list()) {  // Scalar ** Tensor[]
      const MtArg base = f.value("self");
      return f.store(f.e.alu(AluOp::kPow, base, f.list("exponent")));
    }
    const MtArg x = f.list("self");
    return f.store(f.e.alu(AluOp::kPow, x, f.value("exponent")));
  });
  reg(ops, "aten::_foreach_lerp", [](Foreach& f) {
    const MtArg a = f.list("self"), b = f.list("tensors1");
    const MtArg w = f.other();
    auto& e = f.e;
    return f.store(
        e.alu(AluOp::kAdd, a, e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, b, a), w)));
  });
  for (const char* n : {"aten::_foreach_addcmul", "aten::_foreach_addcdiv"}) {
    const AluOp op = std::string(n) == "aten::_foreach_addcmul" ? AluOp::kMultiply : AluOp::kDivide;
    reg(ops, n, [op](Foreach& f) {
      const MtArg x = f.list("self"), t1 = f.list("tensor1"), t2 = f.list("tensor2");
      const MtArg v = f.in_schema("value") ? f.value("value", 1.0f) : f.value("scalars", 1.0f);
      auto& e = f.e;
      return f.store(e.alu(AluOp::kAdd, x, scaled(e, e.alu(op, t1, t2), v)));
    });
  }

  // Per-tensor reductions.
  reg(ops, "aten::_foreach_max", [](Foreach& f) {
    const MtArg x = f.list("self");
    return f.store_scalar(f.e.reduce(x, ReduceOp::kMax));
  });
  for (const char* n : {"aten::_foreach_norm", "aten::_foreach_powsum"}) {
    const bool root = std::string(n) == "aten::_foreach_norm";
    reg(ops, n, [root](Foreach& f) {
      auto& e = f.e;
      const MtArg x = f.list("self");
      const double p = f.number("ord", 2.0);
      const MtArg ax = e.alu(AluOp::kAbsMax, x, MtArg::constant(0));
      if (std::isinf(p)) {
        return f.store_scalar(e.reduce(ax, p > 0 ? ReduceOp::kMax : ReduceOp::kMin));
      }
      if (p == 0.0) {
        const MtArg nz = e.alu(AluOp::kNotEqual, x, MtArg::constant(0));
        return f.store_scalar(e.reduce(nz, ReduceOp::kAdd));
      }
      if (p == 1.0) return f.store_scalar(e.reduce(ax, ReduceOp::kAdd));
      if (p == 2.0) {
        const MtArg s = e.reduce(e.alu(AluOp::kMultiply, x, x), ReduceOp::kAdd);
        return f.store_scalar(root ? e.act(ActFunc::kSqrt, s) : s);
      }
      const float pf = static_cast<float>(p);
      const MtArg s = e.reduce(e.alu(AluOp::kPow, ax, MtArg::constant(pf)), ReduceOp::kAdd);
      return f.store_scalar(root ? e.alu(AluOp::kPow, s, MtArg::constant(1.0f / pf)) : s);
    });
  }
  // Compiled graphs: one pointwise op per list element, where the rule has a lowering.
  auto lowerings = graph_lowerings();
  for (OpRule& r : ops) {
    if (auto it = lowerings.find(r.name); it != lowerings.end()) r.lower = it->second;
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
