// nll_loss forward and backward: the target positions resolved on the host, then indexed
// copies and a reduction. mse_loss: the squared difference (elementwise, or summed by
// kernels/mse_loss.h) and its backward, one elementwise pass.
#include <ATen/ATen.h>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/mse_loss.h"
#include "neuronsim/kernels/reduction.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// The programs move and reduce the picked values for the time; they do not negate, weight or
// write total_weight (and the backward does not scale by it), so ISA mode keeps host values.
constexpr const char* kNllTimingOnly = "nll_loss programs model time, not values";

}  // namespace

NativeOpTable loss_ops() {
  NativeOpTable ops;
  ops.push_back(
      {"aten::nll_loss_forward", [](const OpInvocation& inv) {
         const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
         const at::Tensor target = on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
         const int64_t ignore = inv.arg("ignore_index").toInt();
         const at::Tensor keep = target != ignore;
         const int64_t c = self.dim() == 1 ? self.numel() : self.size(-1);
         const at::Tensor rows = at::arange(target.numel(), at::kLong).masked_select(keep);
         const at::Tensor pos = rows * c + target.masked_select(keep);
         Programs p;
         // The picked values land in the per-sample output (reduction none) or in total_weight's
         // slot as scratch before the reduction writes the scalar.
         const at::Tensor picked =
             out.numel() == rows.numel() && out.numel() > 0 ? out : inv.outputs.at(1);
         if (pos.numel() && picked.numel() >= 1) {
           p.push_back(kernels::build_indexed_copy(inv.name, inv.describe(self.reshape({-1})),
                                                   to_vec(pos), inv.describe(picked.reshape({-1})),
                                                   std::vector<int64_t>(pos.numel(), 0), false,
                                                   inv.core()));
         }
         kernels::ReduceSpec s;
         s.scale = 1.0f / static_cast<float>(std::max<int64_t>(1, pos.numel()));
         if (out.numel() == 1) {
           p.push_back(kernels::build_reduce(
               inv.name,
               inv.describe(self.reshape({-1}).narrow(0, 0, std::max<int64_t>(1, pos.numel()))),
               inv.describe(out.reshape({1})), s, inv.core()));
         }
         return p;
       }});
  ops.back().isa_host_values = kNllTimingOnly;
  ops.push_back({"aten::nll_loss_backward", [](const OpInvocation& inv) {
                   const at::Tensor out = inv.outputs.at(0);
                   const at::Tensor target =
                       on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
                   const int64_t ignore = inv.arg("ignore_index").toInt();
                   const at::Tensor keep = target != ignore;
                   const int64_t c = out.dim() == 1 ? out.numel() : out.size(-1);
                   const at::Tensor pos =
                       at::arange(target.numel(), at::kLong).masked_select(keep) * c +
                       target.masked_select(keep);
                   Programs p{kernels::build_fill(inv.name, inv.describe(out), 0.0f, inv.core())};
                   const at::Tensor g = inv.arg("grad_output").toTensor().reshape({-1});
                   if (pos.numel()) {
                     p.push_back(kernels::build_indexed_copy(
                         inv.name, inv.describe(g), std::vector<int64_t>(pos.numel(), 0),
                         inv.describe(out.reshape({-1})), to_vec(pos), false, inv.core()));
                   }
                   return p;
                 }});
  ops.back().isa_host_values = kNllTimingOnly;
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
