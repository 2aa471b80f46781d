// nll_loss forward and backward: the target positions resolved on the host, then the picked
// log-probabilities and weights gathered, negated, weighted and reduced (kernels/nll_loss.h).
// mse_loss: the squared difference (elementwise, or summed by kernels/mse_loss.h) and its backward,
// one elementwise pass.
#include <ATen/ATen.h>

#include <optional>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/mse_loss.h"
#include "neuronsim/kernels/nll_loss.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// The optional weight argument (None or an undefined tensor: unweighted).
std::optional<at::Tensor> weight_arg(const OpInvocation& inv) {
  if (!inv.has_arg("weight")) return std::nullopt;
  const c10::IValue& w = inv.arg("weight");
  if (!w.isTensor() || !w.toTensor().defined()) return std::nullopt;
  return w.toTensor();
}

// The targets resolved on the host into per-row positions (the index input read as the
// runtime's descriptor generation would): self[i, target[i]] and weight[target[i]], -1 for
// ignore_index. Out-of-range targets raise as the CPU kernel does.
kernels::NllLossSpec nll_spec(const OpInvocation& inv, const at::Tensor& self, bool weighted) {
  const at::Tensor target = on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
  const int64_t ignore = inv.arg("ignore_index").toInt();
  const int64_t classes = self.dim() == 1 ? self.numel() : self.size(-1);
  kernels::NllLossSpec spec;
  spec.reduction = static_cast<int>(inv.arg("reduction").toInt());
  const auto t = target.accessor<int64_t, 1>();
  for (int64_t i = 0; i < target.numel(); ++i) {
    if (t[i] == ignore) {
      spec.self_pos.push_back(-1);
      if (weighted) spec.weight_pos.push_back(-1);
      continue;
    }
    TORCH_CHECK_INDEX(t[i] >= 0 && t[i] < classes, "Target ", t[i], " is out of bounds.");
    spec.self_pos.push_back(i * classes + t[i]);
    if (weighted) spec.weight_pos.push_back(t[i]);
  }
  return spec;
}

}  // namespace

NativeOpTable loss_ops() {
  NativeOpTable ops;
  ops.push_back(
      {"aten::nll_loss_forward", [](const OpInvocation& inv) {
         const at::Tensor self = inv.tensor(0);
         const auto weight = weight_arg(inv);
         const auto spec = nll_spec(inv, self, weight.has_value());
         const kernels::TensorDesc w = weight ? inv.describe(*weight) : kernels::TensorDesc{};
         return Programs{kernels::build_nll_loss(
             inv.name, inv.describe(self), weight ? &w : nullptr, inv.describe(inv.outputs.at(0)),
             inv.describe(inv.outputs.at(1)), spec, inv.core())};
       }});
  ops.push_back({"aten::nll_loss_backward", [](const OpInvocation& inv) {
                   const at::Tensor out = inv.outputs.at(0);
                   const auto weight = weight_arg(inv);
                   const auto spec = nll_spec(inv, inv.arg("self").toTensor(), weight.has_value());
                   const kernels::TensorDesc w =
                       weight ? inv.describe(*weight) : kernels::TensorDesc{};
                   return Programs{
                       kernels::build_fill(inv.name, inv.describe(out), 0.0f, inv.core()),
                       kernels::build_nll_loss_backward(
                           inv.name, inv.describe(inv.arg("grad_output").toTensor()),
                           weight ? &w : nullptr, inv.describe(inv.arg("total_weight").toTensor()),
                           inv.describe(out), spec, inv.core())};
                 }});
  // mse_loss's reduction: 0 none, 1 mean, 2 sum (at::Reduction).
  NativeOp mse{"aten::mse_loss", [](const OpInvocation& inv) {
                 const at::Tensor self = inv.tensor(0), target = inv.arg("target").toTensor();
                 const at::Tensor out = inv.outputs.at(0);
                 const int64_t reduction = inv.arg("reduction").toInt();
                 if (reduction == 0) {
                   kernels::Expr e;
                   const kernels::Arg d = e.alu(device::AluOp::kSubtract, kernels::Arg::input(0),
                                                kernels::Arg::input(1));
                   e.alu(device::AluOp::kMultiply, d, d);
                   return Programs{kernels::build_elementwise(
                       inv.name, {inv.describe(self), inv.describe(target)}, inv.describe(out), e,
                       inv.core())};
                 }
                 const int64_t n =
                     at::infer_size(self.sizes(), target.sizes()).empty()
                         ? 1
                         : c10::multiply_integers(at::infer_size(self.sizes(), target.sizes()));
                 const float scale = reduction == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
                 return Programs{kernels::build_squared_error_sum(
                     inv.name, inv.describe(self), inv.describe(target),
                     inv.describe(out.reshape({1})), scale, inv.core())};
               }};
  mse.cacheable = true;
  ops.push_back(mse);
  NativeOp mse_backward{
      "aten::mse_loss_backward", [](const OpInvocation& inv) {
        // As the CPU kernel: norm * (self - target) * grad_output, norm = 2 (/ numel for mean).
        const at::Tensor self = inv.arg("self").toTensor();
        const double norm = inv.arg("reduction").toInt() == 1
                                ? 2.0 / static_cast<double>(std::max<int64_t>(1, self.numel()))
                                : 2.0;
        kernels::Expr e;
        const kernels::Arg d =
            e.alu(device::AluOp::kSubtract, kernels::Arg::input(1), kernels::Arg::input(2));
        const kernels::Arg t =
            e.alu(device::AluOp::kMultiply, d, kernels::Arg::constant(static_cast<float>(norm)));
        e.alu(device::AluOp::kMultiply, t, kernels::Arg::input(0));
        return Programs{kernels::build_elementwise(
            inv.name,
            {inv.describe(inv.arg("grad_output").toTensor()), inv.describe(self),
             inv.describe(inv.arg("target").toTensor())},
            inv.describe(inv.outputs.at(0)), e, inv.core())};
      }};
  mse_backward.cacheable = true;
  ops.push_back(mse_backward);
  return ops;
}

}  // namespace neuronsim::backend
