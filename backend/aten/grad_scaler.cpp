// The GradScaler pair (torch.amp.GradScaler on the device): unscaling every gradient while
// checking for inf/NaN, and updating the scale from the result. Both are multi-tensor programs;
// values come from ATen's CPU kernels on the CPU views.
#include <ATen/ATen.h>

#include <limits>

#include "aten/native_ops.h"
#include "neuronsim/kernels/multi_tensor.h"

namespace neuronsim::backend {
namespace {

using device::AluOp;
using device::ReduceOp;
using kernels::MtArg;
using kernels::MtExpr;
using kernels::MtGroup;
using Programs = std::vector<device::Program>;

constexpr float kInf = std::numeric_limits<float>::infinity();

// grads *= inv_scale; found_inf = max(found_inf, any gradient element not finite).
Programs unscale(const OpInvocation& inv) {
  const auto grads = inv.arg("self").toTensorList();
  const kernels::TensorDesc found_inf = inv.describe(inv.arg("found_inf").toTensor());
  const kernels::TensorDesc inv_scale = inv.describe(inv.arg("inv_scale").toTensor());
  std::vector<MtGroup> groups;
  for (const at::Tensor& g : grads) {
    MtGroup grp;
    grp.tensors = {inv.describe(g)};
    grp.outputs = {inv.describe(g)};
    grp.scalars = {inv_scale, found_inf};
    grp.scalar_outputs = {found_inf};
    groups.push_back(std::move(grp));
  }
  MtExpr e;
  const MtArg g = MtArg::tensor(0);
  e.stores.push_back({e.alu(AluOp::kMultiply, g, MtArg::scalar(0)), 0});
  // |x| < inf is 0 for inf and NaN alike.
  const MtArg finite =
      e.alu(AluOp::kIsLt, e.alu(AluOp::kAbsMax, g, MtArg::constant(0)), MtArg::constant(kInf));
  const MtArg bad = e.reduce(e.alu(AluOp::kSubtract, MtArg::constant(1), finite), ReduceOp::kMax,
                             /*across_groups=*/true);
  e.scalar_stores.push_back({e.alu(AluOp::kMax, bad, MtArg::scalar(1)), 0});
  return {kernels::build_multi_tensor(inv.name, groups, e, inv.core())};
}

// After an overflow the scale backs off and the tracker restarts; otherwise the tracker counts
// up and every growth_interval steps the scale grows (unless that overflows).
Programs update_scale(const OpInvocation& inv) {
  const at::Tensor scale = inv.tensor(0);
  const at::Tensor tracker = inv.arg("growth_tracker").toTensor();
  MtGroup grp;
  grp.tensors = {inv.describe(scale), inv.describe(tracker),
                 inv.describe(inv.arg("found_inf").toTensor())};
  grp.outputs = {inv.describe(scale), inv.describe(tracker)};
  MtExpr e;
  const MtArg s = MtArg::tensor(0), t = MtArg::tensor(1), found = MtArg::tensor(2);
  const float growth = static_cast<float>(inv.scalar("scale_growth_factor", 2.0));
  const float backoff = static_cast<float>(inv.scalar("scale_backoff_factor", 0.5));
  const float interval = static_cast<float>(inv.scalar("growth_interval", 2000));
  const MtArg succ = e.alu(AluOp::kAdd, t, MtArg::constant(1));
  const MtArg grow = e.alu(AluOp::kIsEqual, succ, MtArg::constant(interval));
  const MtArg grown = e.alu(AluOp::kMultiply, s, MtArg::constant(growth));
  const MtArg grown_ok =
      e.alu(AluOp::kIsLt, e.alu(AluOp::kAbsMax, grown, MtArg::constant(0)), MtArg::constant(kInf));
  const MtArg s_ok = e.select(e.alu(AluOp::kLogicalAnd, grow, grown_ok), grown, s);
  const MtArg t_ok = e.select(grow, MtArg::constant(0), succ);
  e.stores.push_back(
      {e.select(found, e.alu(AluOp::kMultiply, s, MtArg::constant(backoff)), s_ok), 0});
  e.stores.push_back({e.select(found, MtArg::constant(0), t_ok), 1});
  return {kernels::build_multi_tensor(inv.name, {grp}, e, inv.core())};
}

bool in_place(const OpInvocation& inv) {
  return !inv.name.empty() && inv.name.back() == '_';
}

}  // namespace

NativeOpTable grad_scaler_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::_amp_foreach_non_finite_check_and_unscale", unscale, in_place});
  ops.push_back({"aten::_amp_update_scale", update_scale, in_place});
  return ops;
}

}  // namespace neuronsim::backend
