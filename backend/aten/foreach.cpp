// The _foreach_* ops torch.optim's foreach paths and clip_grad_norm_ use: each one multi-tensor
// program over the whole list (kernels/multi_tensor.h), as multi_tensor_apply does on CUDA.
// Values come from the ops' CompositeExplicitAutograd kernels on the CPU views.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>

#include "aten/native_ops.h"
#include "neuronsim/kernels/multi_tensor.h"

namespace neuronsim::backend {
namespace {

using device::ActFunc;
using device::AluOp;
using device::ReduceOp;
using kernels::MtArg;
using kernels::MtExpr;
using Programs = std::vector<device::Program>;

// One foreach invocation as multi-tensor groups: group i holds the i-th tensor of every list.
class Foreach {
 public:
  explicit Foreach(const OpInvocation& inv) : inv_(inv) {
    const std::string lead =
        inv.has_arg("self") && inv.arg("self").isTensorList() ? "self" : "exponent";
    n_ = inv.arg(lead).toTensorList().size();
    groups_.resize(n_);
  }

  /// A Tensor[] argument, element by element.
  MtArg list(const std::string& name) {
    const auto l = inv_.arg(name).toTensorList();
    TORCH_CHECK(l.size() == n_, "neuronsim: ", inv_.name, ": list ", name, " has ", l.size(),
                " tensors, expected ", n_);
    for (size_t i = 0; i < n_; ++i) groups_[i].tensors.push_back(inv_.describe(l.get(i)));
    integer_ &= all_integral(l);
    return MtArg::tensor(static_cast<int>(groups_[0].tensors.size()) - 1);
  }

  /// A Scalar, Scalar[] (one per tensor), Tensor (one-element, shared) or Tensor[] argument.
  MtArg value(const std::string& name, float fallback = 0.0f) {
    if (!inv_.has_arg(name)) return MtArg::constant(fallback);
    const c10::IValue& v = inv_.arg(name);
    if (v.isNone()) return MtArg::constant(fallback);
    if (v.isTensorList()) return list(name);
    if (v.isTensor()) {
      const at::Tensor t = v.toTensor();
      if (!t.device().is_privateuseone()) return MtArg::constant(t.item().toFloat());
      for (auto& g : groups_) g.scalars.push_back(inv_.describe(t));
      integer_ &= c10::isIntegralType(t.scalar_type(), true);
      return MtArg::scalar(static_cast<int>(groups_.empty() ? 0 : groups_[0].scalars.size() - 1));
    }
    if (v.isList()) {  // Scalar[]: a constant per group
      const auto& l = v.toListRef();
      TORCH_CHECK(l.size() == n_, "neuronsim: ", inv_.name, ": ", name, " has ", l.size(),
                  " scalars, expected ", n_);
      for (size_t i = 0; i < n_; ++i) {
        groups_[i].params.push_back(static_cast<float>(l[i].toScalar().toDouble()));
        integer_ &= l[i].toScalar().isIntegral(false);
      }
      return MtArg::param(static_cast<int>(groups_.empty() ? 0 : groups_[0].params.size() - 1));
    }
    const c10::Scalar s = v.isScalar() ? v.toScalar() : c10::Scalar(inv_.scalar(name, fallback));
    integer_ &= s.isIntegral(false);
    return MtArg::constant(static_cast<float>(s.toDouble()));
  }

  /// The value to write into each output tensor (in place: self; out=: out; else the returns).
  Programs store(MtArg value) {
    const std::vector<at::Tensor> outs = outputs();
    for (size_t i = 0; i < n_; ++i) groups_[i].outputs.push_back(inv_.describe(outs.at(i)));
    integer_ &= all_integral(outs);
    e.stores.push_back({value, 0});
    return build();
  }

  /// A per-tensor result (norm, max): one-element outputs.
  Programs store_scalar(MtArg value) {
    const std::vector<at::Tensor> outs = outputs();
    for (size_t i = 0; i < n_; ++i) groups_[i].scalar_outputs.push_back(inv_.describe(outs.at(i)));
    e.scalar_stores.push_back({value, 0});
    return build();
  }

  MtExpr e;

 private:
  std::vector<at::Tensor> outputs() const {
    if (inv_.name.back() == '_') {
      const auto l = inv_.arg("self").toTensorList();
      return {l.begin(), l.end()};
    }
    if (inv_.has_arg("out")) {
      const auto l = inv_.arg("out").toTensorList();
      return {l.begin(), l.end()};
    }
    return inv_.outputs;
  }

  template <typename List>
  static bool all_integral(const List& l) {
    for (const at::Tensor& t : l) {
      if (!c10::isIntegralType(t.scalar_type(), true)) return false;
    }
    return true;
  }

  Programs build() {
    e.integer = integer_ && e.reductions.empty();
    return {kernels::build_multi_tensor(inv_.name, groups_, e, inv_.core())};
  }

  const OpInvocation& inv_;
  size_t n_ = 0;
  std::vector<kernels::MtGroup> groups_;
  bool integer_ = true;
};

using ForeachFn = std::function<Programs(Foreach&)>;

void reg(NativeOpTable& ops, const std::string& name, ForeachFn fn) {
  ops.push_back({name,
                 [fn](const OpInvocation& inv) {
                   Foreach f(inv);
                   return fn(f);
                 },
                 nullptr, /*composite=*/true});
}

// The second operand of a binary foreach op, whatever its overload calls it.
MtArg other(Foreach& f, const OpInvocation& inv) {
  for (const char* n : {"other", "scalar", "scalars", "exponent", "weight", "weights"}) {
    if (inv.has_arg(n)) return f.value(n);
  }
  TORCH_CHECK(false, "neuronsim: ", inv.name, " has no second operand");
}

// x * alpha, skipping alpha == 1.
MtArg scaled(MtExpr& e, MtArg x, MtArg alpha) {
  if (alpha.kind == MtArg::kImm && alpha.imm == 1.0f) return x;
  return e.alu(AluOp::kMultiply, x, alpha);
}

}  // namespace

NativeOpTable foreach_ops() {
  NativeOpTable ops;
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
    ops.push_back({name,
                   [op](const OpInvocation& inv) {
                     Foreach f(inv);
                     const MtArg x = f.list("self");
                     return f.store(f.e.alu(op, x, other(f, inv)));
                   },
                   nullptr, true});
  }
  for (const char* n : {"aten::_foreach_add", "aten::_foreach_sub"}) {
    const AluOp op = std::string(n) == "aten::_foreach_add" ? AluOp::kAdd : AluOp::kSubtract;
    ops.push_back({n,
                   [op](const OpInvocation& inv) {
                     Foreach f(inv);
                     const MtArg x = f.list("self");
                     const MtArg y = other(f, inv);
                     const MtArg alpha = f.value("alpha", 1.0f);
                     return f.store(f.e.alu(op, x, scaled(f.e, y, alpha)));
                   },
                   nullptr, true});
  }
  ops.push_back({"aten::_foreach_pow",
                 [](const OpInvocation& inv) {
                   Foreach f(inv);
                   if (!inv.arg("self").isTensorList()) {  // Scalar ** Tensor[]
                     const MtArg base = f.value("self");
                     return f.store(f.e.alu(AluOp::kPow, base, f.list("exponent")));
                   }
                   const MtArg x = f.list("self");
                   return f.store(f.e.alu(AluOp::kPow, x, f.value("exponent")));
                 },
                 nullptr, true});
  ops.push_back({"aten::_foreach_lerp",
                 [](const OpInvocation& inv) {
                   Foreach f(inv);
                   const MtArg a = f.list("self"), b = f.list("tensors1");
                   const MtArg w = other(f, inv);
                   auto& e = f.e;
                   return f.store(e.alu(AluOp::kAdd, a,
                                        e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, b, a), w)));
                 },
                 nullptr, true});
  for (const char* n : {"aten::_foreach_addcmul", "aten::_foreach_addcdiv"}) {
    const AluOp op = std::string(n) == "aten::_foreach_addcmul" ? AluOp::kMultiply : AluOp::kDivide;
    ops.push_back({n,
                   [op](const OpInvocation& inv) {
                     Foreach f(inv);
                     const MtArg x = f.list("self"), t1 = f.list("tensor1"), t2 = f.list("tensor2");
                     const MtArg v =
                         inv.has_arg("value") ? f.value("value", 1.0f) : f.value("scalars", 1.0f);
                     auto& e = f.e;
                     return f.store(e.alu(AluOp::kAdd, x, scaled(e, e.alu(op, t1, t2), v)));
                   },
                   nullptr, true});
  }

  // Per-tensor reductions.
  reg(ops, "aten::_foreach_max", [](Foreach& f) {
    const MtArg x = f.list("self");
    return f.store_scalar(f.e.reduce(x, ReduceOp::kMax));
  });
  for (const char* n : {"aten::_foreach_norm", "aten::_foreach_powsum"}) {
    const bool root = std::string(n) == "aten::_foreach_norm";
    ops.push_back(
        {n,
         [root](const OpInvocation& inv) {
           Foreach f(inv);
           auto& e = f.e;
           const MtArg x = f.list("self");
           const double p = inv.scalar("ord", 2.0);
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
         },
         nullptr, true});
  }
  return ops;
}

}  // namespace neuronsim::backend
