// nll_loss forward and backward: the target positions resolved on the host, then indexed
// copies and a reduction.
#include <ATen/ATen.h>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
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
  return ops;
}

}  // namespace neuronsim::backend
