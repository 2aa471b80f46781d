// The GradScaler pair (torch.amp.GradScaler on the device): unscaling every gradient while
// checking for inf/NaN, and updating the scale from the result. Both are multi-tensor programs.
#include <limits>

#include "neuronsim/kernels/multi_tensor.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::AluOp;
using device_model::ReduceOp;

constexpr float kInf = std::numeric_limits<float>::infinity();

// grads *= inv_scale; found_inf = max(found_inf, any gradient element not finite).
Programs unscale(const OpCall& call) {
  const TensorDesc found_inf = call.tensor("found_inf").desc;
  const TensorDesc inv_scale = call.tensor("inv_scale").desc;
  std::vector<MtGroup> groups;
  for (const TensorArg& g : call.tensors("self")) {
    MtGroup grp;
    grp.tensors = {g.desc};
    grp.outputs = {g.desc};
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
  return {build_multi_tensor(call.name(), groups, e, call.core())};
}

// After an overflow the scale backs off and the tracker restarts; otherwise the tracker counts
// up and every growth_interval steps the scale grows (unless that overflows).
Programs update_scale(const OpCall& call) {
  const TensorDesc scale = call.tensor(0).desc, tracker = call.tensor("growth_tracker").desc;
  MtGroup grp;
  grp.tensors = {scale, tracker, call.tensor("found_inf").desc};
  grp.outputs = {scale, tracker};
  MtExpr e;
  const MtArg s = MtArg::tensor(0), t = MtArg::tensor(1), found = MtArg::tensor(2);
  const float growth = static_cast<float>(call.number("scale_growth_factor", 2.0));
  const float backoff = static_cast<float>(call.number("scale_backoff_factor", 0.5));
  const float interval = static_cast<float>(call.number("growth_interval", 2000));
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
  return {build_multi_tensor(call.name(), {grp}, e, call.core())};
}

bool in_place(const OpCall& call) {
  return !call.name().empty() && call.name().back() == '_';
}

}  // namespace

std::vector<OpRule> grad_scaler_rules() {
  OpRule unscale_rule;
  unscale_rule.name = "aten::_amp_foreach_non_finite_check_and_unscale";
  unscale_rule.build = unscale;
  unscale_rule.supports = in_place;
  OpRule update;
  update.name = "aten::_amp_update_scale";
  update.build = update_scale;
  update.supports = in_place;
  return {unscale_rule, update};
}

}  // namespace neuronsim::kernels::ops
