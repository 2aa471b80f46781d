// The fused optimizer steps torch.optim picks with fused=True (_fused_adam_, _fused_adamw_,
// _fused_sgd_): one multi-tensor program over every parameter, reading each tensor once and
// writing it once, as the CUDA kernels do. The optimizer state step (a one-element device tensor
// per parameter), a tensor lr, and the GradScaler's grad_scale / found_inf are scalar operands
// read once per parameter.
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/kernels/multi_tensor.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;

// The parameter lists of a fused optimizer call as groups (group i: the i-th parameter).
class FusedStep {
 public:
  explicit FusedStep(const OpCall& call)
      : call_(call), n_(call.tensors("self").size()), groups_(n_) {}

  /// A Tensor[] argument (empty lists are absent: amsgrad off, momentum 0).
  MtArg list(const std::string& name, bool output) {
    const std::vector<TensorArg> l = call_.tensors(name);
    if (l.size() != n_) {
      throw std::invalid_argument(fmt::format("neuronsim: {}: {} has {} tensors, expected {}",
                                              call_.name(), name, l.size(), n_));
    }
    for (size_t i = 0; i < n_; ++i) groups_[i].tensors.push_back(l[i].desc);
    if (output) outputs_.push_back(name);
    return MtArg::tensor(static_cast<int>(groups_.empty() ? 0 : groups_[0].tensors.size() - 1));
  }
  bool has_list(const std::string& name) const {
    return call_.in_schema(name) && call_.tensors(name).size() == n_ && n_ > 0;
  }
  /// One device scalar per parameter (state_steps), a constant per group when on the CPU.
  MtArg per_tensor_scalar(const std::string& name) {
    const std::vector<TensorArg> l = call_.tensors(name);
    if (n_ && l.at(0).on_device) {
      for (size_t i = 0; i < n_; ++i) groups_[i].scalars.push_back(l[i].desc);
      return MtArg::scalar(static_cast<int>(groups_[0].scalars.size() - 1));
    }
    for (size_t i = 0; i < n_; ++i)
      groups_[i].params.push_back(static_cast<float>(read_doubles(l.at(i)).at(0)));
    return MtArg::param(static_cast<int>(n_ ? groups_[0].params.size() - 1 : 0));
  }
  /// A float argument, or an optional one-element tensor shared by every group (nullopt when
  /// absent).
  std::optional<MtArg> shared(const std::string& name) {
    if (!call_.has(name)) return std::nullopt;
    if (call_.kind(name) != ArgKind::kTensor)
      return MtArg::constant(static_cast<float>(call_.number(name, 0.0)));
    const TensorArg t = call_.tensor(name);
    if (!t.on_device) return MtArg::constant(static_cast<float>(call_.number(name, 0.0)));
    for (auto& g : groups_) g.scalars.push_back(t.desc);
    return MtArg::scalar(static_cast<int>(n_ ? groups_[0].scalars.size() - 1 : 0));
  }
  float num(const std::string& name) const { return static_cast<float>(call_.number(name, 0.0)); }
  bool flag(const std::string& name) const {
    return call_.kind(name) == ArgKind::kBool && call_.boolean(name, false);
  }

  /// Writes value into the list `name` (in place).
  void store(const std::string& name, MtArg value) {
    const std::vector<TensorArg> l = call_.tensors(name);
    const int k = static_cast<int>(n_ ? groups_[0].outputs.size() : 0);
    for (size_t i = 0; i < n_; ++i) groups_[i].outputs.push_back(l.at(i).desc);
    stores_.push_back({value, k});
  }

  /// With found_inf set the step changes nothing (CUDA returns early): every output keeps its
  /// old value.
  Programs build(const std::optional<MtArg>& found_inf, const std::vector<MtArg>& old) {
    if (found_inf) {
      const MtArg skip = e.broadcast(*found_inf);
      for (size_t k = 0; k < stores_.size(); ++k)
        stores_[k].first = e.select(skip, old.at(k), stores_[k].first);
    }
    e.stores = stores_;
    return {build_multi_tensor(call_.name(), groups_, e, call_.core())};
  }

  MtExpr e;

 private:
  const OpCall& call_;
  size_t n_;
  std::vector<MtGroup> groups_;
  std::vector<std::string> outputs_;
  std::vector<std::pair<MtArg, int>> stores_;
};

MtArg mul(MtExpr& e, MtArg a, MtArg b) {
  return e.alu(AluOp::kMultiply, a, b);
}
MtArg add(MtExpr& e, MtArg a, MtArg b) {
  return e.alu(AluOp::kAdd, a, b);
}
MtArg sub(MtExpr& e, MtArg a, MtArg b) {
  return e.alu(AluOp::kSubtract, a, b);
}
MtArg imm(float v) {
  return MtArg::constant(v);
}

// The gradient as the step uses it: unscaled (and written back unscaled, as the CPU and CUDA
// kernels do), negated when maximizing. `old` collects the value each store replaces.
MtArg prepare_grad(FusedStep& f, MtArg g, const std::optional<MtArg>& grad_scale,
                   std::vector<MtArg>& old) {
  if (grad_scale) {
    g = f.e.alu(AluOp::kDivide, g, *grad_scale);
    f.store("grads", g);
    old.push_back(MtArg::tensor(1));
  }
  if (f.flag("maximize")) g = mul(f.e, g, imm(-1));
  return g;
}

Programs adam(const OpCall& call, bool decoupled) {
  FusedStep f(call);
  auto& e = f.e;
  const MtArg p = f.list("self", true), g0 = f.list("grads", true), m = f.list("exp_avgs", true),
              v = f.list("exp_avg_sqs", true);
  const bool amsgrad = f.flag("amsgrad") && f.has_list("max_exp_avg_sqs");
  const MtArg vmax = amsgrad ? f.list("max_exp_avg_sqs", true) : MtArg{};
  const MtArg step = f.per_tensor_scalar("state_steps");
  const MtArg lr = *f.shared("lr");
  const std::optional<MtArg> grad_scale = f.shared("grad_scale"), found_inf = f.shared("found_inf");
  const float beta1 = f.num("beta1"), beta2 = f.num("beta2"), wd = f.num("weight_decay"),
              eps = f.num("eps");
  std::vector<MtArg> old;
  MtArg g = prepare_grad(f, g0, grad_scale, old);
  MtArg param = p;
  if (wd != 0.0f) {
    if (decoupled)
      param = mul(e, p, sub(e, imm(1), mul(e, lr, imm(wd))));
    else
      g = add(e, g, mul(e, p, imm(wd)));
  }
  const MtArg m1 = add(e, mul(e, m, imm(beta1)), mul(e, g, imm(1 - beta1)));
  const MtArg v1 = add(e, mul(e, v, imm(beta2)), mul(e, mul(e, g, g), imm(1 - beta2)));
  // Bias corrections from the step count, once per parameter.
  const MtArg bc1 = sub(e, imm(1), e.alu(AluOp::kPow, imm(beta1), step));
  const MtArg bc2 = sub(e, imm(1), e.alu(AluOp::kPow, imm(beta2), step));
  const MtArg step_size = e.alu(AluOp::kDivide, lr, bc1);
  const MtArg bc2_sqrt = e.act(ActFunc::kSqrt, bc2);
  MtArg vden = v1;
  MtArg vmax1;
  if (amsgrad) vden = vmax1 = e.alu(AluOp::kMax, vmax, v1);
  const MtArg denom =
      add(e, e.alu(AluOp::kDivide, e.act(ActFunc::kSqrt, vden), bc2_sqrt), imm(eps));
  const MtArg p1 = sub(e, param, mul(e, e.alu(AluOp::kDivide, m1, denom), step_size));
  f.store("self", p1);
  f.store("exp_avgs", m1);
  f.store("exp_avg_sqs", v1);
  for (MtArg o : {p, m, v}) old.push_back(o);
  if (amsgrad) {
    f.store("max_exp_avg_sqs", vmax1);
    old.push_back(vmax);
  }
  return f.build(found_inf, old);
}

Programs sgd(const OpCall& call) {
  FusedStep f(call);
  auto& e = f.e;
  const MtArg p = f.list("self", true), g0 = f.list("grads", true);
  const float momentum = f.num("momentum"), wd = f.num("weight_decay"),
              dampening = f.num("dampening");
  const bool has_buf = momentum != 0.0f && f.has_list("momentum_buffer_list");
  const MtArg buf = has_buf ? f.list("momentum_buffer_list", true) : MtArg{};
  const MtArg lr = *f.shared("lr");
  const std::optional<MtArg> grad_scale = f.shared("grad_scale"), found_inf = f.shared("found_inf");
  std::vector<MtArg> old;
  MtArg g = prepare_grad(f, g0, grad_scale, old);
  if (wd != 0.0f) g = add(e, g, mul(e, p, imm(wd)));
  MtArg d = g;
  if (has_buf) {
    const MtArg b1 = f.flag("is_first_step")
                         ? g
                         : add(e, mul(e, buf, imm(momentum)), mul(e, g, imm(1 - dampening)));
    d = f.flag("nesterov") ? add(e, g, mul(e, b1, imm(momentum))) : b1;
    f.store("momentum_buffer_list", b1);
  }
  f.store("self", sub(e, p, mul(e, d, lr)));
  if (has_buf) old.push_back(buf);
  old.push_back(p);
  return f.build(found_inf, old);
}

// Only the in-place steps (what torch.optim calls); the functional and out= variants that
// functionalization produces keep the CPU kernel through the fallback.
bool in_place(const OpCall& call) {
  return !call.name().empty() && call.name().back() == '_';
}

}  // namespace

std::vector<OpRule> fused_optimizer_rules() {
  std::vector<OpRule> ops;
  for (const auto& [name, build] :
       std::initializer_list<std::pair<const char*, std::function<Programs(const OpCall&)>>>{
           {"aten::_fused_adam", [](const OpCall& call) { return adam(call, false); }},
           {"aten::_fused_adamw", [](const OpCall& call) { return adam(call, true); }},
           {"aten::_fused_sgd", sgd}}) {
    OpRule r;
    r.name = name;
    r.build = build;
    // Only the in-place steps (what torch.optim calls); the functional and out= variants that
    // functionalization produces keep the CPU kernel through the fallback.
    r.supports = in_place;
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
