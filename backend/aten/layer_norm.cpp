// native_layer_norm and its backward: the kernel library's layer norm.
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/layer_norm.h"
#include "neuronsim/kernels/spmd.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

}  // namespace

NativeOpTable layer_norm_ops() {
  NativeOpTable ops;
  ops.push_back(
      {"aten::native_layer_norm", [](const OpInvocation& inv) {
         kernels::LayerNormIo io;
         io.in = inv.describe(inv.tensor(0));
         io.out = inv.describe(inv.outputs.at(0));
         io.normalized_dims =
             static_cast<int64_t>(inv.arg("normalized_shape").toIntVector().size());
         const at::Tensor w =
             inv.arg("weight").isTensor() ? inv.arg("weight").toTensor() : at::Tensor();
         const at::Tensor b =
             inv.arg("bias").isTensor() ? inv.arg("bias").toTensor() : at::Tensor();
         if (w.defined()) io.weight = inv.describe(w);
         if (b.defined()) io.bias = inv.describe(b);
         if (inv.outputs.size() > 2 && inv.outputs[1].defined() && inv.outputs[1].numel() > 0) {
           io.mean = inv.describe(inv.outputs[1]);
           io.rstd = inv.describe(inv.outputs[2]);
         }
         io.eps = static_cast<float>(inv.scalar("eps", 1e-5));
         return Programs{kernels::build_layer_norm_grid(inv.name, io, inv.core(), inv.grid)};
       }});
  ops.push_back({"aten::native_layer_norm_backward",
                 [](const OpInvocation& inv) {
                   kernels::LayerNormBackwardIo io;
                   io.grad_out = inv.describe(inv.arg("grad_out").toTensor());
                   io.in = inv.describe(inv.arg("input").toTensor());
                   io.mean = inv.describe(inv.arg("mean").toTensor());
                   io.rstd = inv.describe(inv.arg("rstd").toTensor());
                   io.normalized_dims =
                       static_cast<int64_t>(inv.arg("normalized_shape").toIntVector().size());
                   if (inv.arg("weight").isTensor() && inv.arg("weight").toTensor().defined()) {
                     io.weight = inv.describe(inv.arg("weight").toTensor());
                   }
                   if (inv.outputs.size() > 0 && inv.outputs[0].defined())
                     io.grad_in = inv.describe(inv.outputs[0]);
                   if (inv.outputs.size() > 1 && inv.outputs[1].defined())
                     io.grad_weight = inv.describe(inv.outputs[1]);
                   if (inv.outputs.size() > 2 && inv.outputs[2].defined())
                     io.grad_bias = inv.describe(inv.outputs[2]);
                   return Programs{kernels::build_layer_norm_backward(inv.name, io, inv.core())};
                 },
                 [](const OpInvocation& inv) {
                   // One pass per row: the normalized size must fit SBUF and eight PSUM-bank column
                   // sums.
                   int64_t d = 1;
                   for (int64_t s : inv.arg("normalized_shape").toIntVector()) d *= s;
                   return d <= 4096;
                 }});
  return ops;
}

}  // namespace neuronsim::backend
