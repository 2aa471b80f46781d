// convolution and convolution_backward: the kernel library's shifted-matmul convolutions on
// TensorE. Both ops are CompositeExplicitAutograd in ATen (no CPU kernel of their own), so they
// are registered here for PrivateUse1 directly; the boxed native kernel computes their values
// with the composite on CPU views. PrivateUse1's _convolution path (convolution_overrideable)
// leads back to them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "accelerator/context.h"
#include "aten/native_boxed.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/convolution.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

kernels::ConvSpec spec_of(const OpInvocation& inv) {
  kernels::ConvSpec s;
  s.stride = inv.ints("stride");
  s.padding = inv.ints("padding");
  s.dilation = inv.ints("dilation");
  s.output_padding = inv.ints("output_padding");
  s.transposed = inv.arg("transposed").toBool();
  const c10::IValue& g = inv.arg("groups");
  s.groups = g.isInt() ? g.toInt() : g.toSymInt().guard_int(__FILE__, __LINE__);
  return s;
}

// TensorE multiplies floating-point data; the shapes must tile into SBUF.
bool supported(const OpInvocation& inv, const at::Tensor& input, const at::Tensor& weight,
               const std::vector<int64_t>& out) {
  for (const at::Tensor& t : {input, weight}) {
    if (!t.defined() || !c10::isFloatingType(t.scalar_type())) return false;
  }
  if (input.dim() < 3 || input.dim() > 5) return false;
  if (input.scalar_type() != weight.scalar_type()) return false;
  const auto dt = device_dtype(input.scalar_type());
  return dt && with_runtime([&](runtime::Runtime& r) {
           return kernels::convolution_fits(input.sizes().vec(), weight.sizes().vec(), out,
                                            spec_of(inv), *dt, r.device().params().core);
         });
}

// The forward output's sizes (PyTorch's formula), for the support check that runs before it.
std::vector<int64_t> conv_out_sizes(const OpInvocation& inv, const at::Tensor& x,
                                    const at::Tensor& w) {
  const kernels::ConvSpec s = spec_of(inv);
  auto at_d = [](const std::vector<int64_t>& v, size_t d, int64_t f) {
    return v.empty() ? f : (v.size() == 1 ? v[0] : v.at(d));
  };
  std::vector<int64_t> out{x.size(0), s.transposed ? w.size(1) * s.groups : w.size(0)};
  for (int64_t d = 2; d < x.dim(); ++d) {
    const size_t i = static_cast<size_t>(d - 2);
    const int64_t st = at_d(s.stride, i, 1), p = at_d(s.padding, i, 0), dl = at_d(s.dilation, i, 1),
                  k = w.size(d);
    out.push_back(s.transposed ? (x.size(d) - 1) * st - 2 * p + dl * (k - 1) +
                                     at_d(s.output_padding, i, 0) + 1
                               : (x.size(d) + 2 * p - dl * (k - 1) - 1) / st + 1);
  }
  return out;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                    c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  return at::convolution_symint(input, weight, bias, stride, padding, dilation, transposed,
                                output_padding, std::move(groups));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  const c10::SymInt out_channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  std::vector<c10::SymInt> bias_sizes{out_channels};
  return at::convolution_backward_symint(
      grad_output, input, weight, c10::SymIntArrayRef(bias_sizes), stride, padding, dilation,
      transposed, output_padding, std::move(groups), output_mask);
}

}  // namespace

NativeOpTable convolution_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::convolution",
                 [](const OpInvocation& inv) {
                   const at::Tensor b =
                       inv.arg("bias").isTensor() ? inv.arg("bias").toTensor() : at::Tensor();
                   std::optional<kernels::TensorDesc> bd;
                   if (b.defined()) bd = inv.describe(b);
                   return Programs{kernels::build_convolution(
                       inv.name, inv.describe(inv.tensor(0)), inv.describe(inv.tensor(1)), bd,
                       inv.describe(inv.outputs.at(0)), spec_of(inv), inv.core())};
                 },
                 [](const OpInvocation& inv) {
                   const at::Tensor x = inv.tensor(0), w = inv.tensor(1);
                   if (!x.defined() || !w.defined() || x.dim() != w.dim()) return false;
                   const at::Tensor b =
                       inv.arg("bias").isTensor() ? inv.arg("bias").toTensor() : at::Tensor();
                   if (b.defined() && !c10::isFloatingType(b.scalar_type())) return false;
                   return supported(inv, x, w, conv_out_sizes(inv, x, w));
                 }});
  ops.push_back({"aten::convolution_backward",
                 [](const OpInvocation& inv) {
                   kernels::ConvBackwardIo io;
                   io.grad_out = inv.describe(inv.tensor(0));
                   io.input = inv.describe(inv.tensor(1));
                   io.weight = inv.describe(inv.tensor(2));
                   auto out = [&](size_t i) -> std::optional<kernels::TensorDesc> {
                     if (i < inv.outputs.size() && inv.outputs[i].defined())
                       return inv.describe(inv.outputs[i]);
                     return std::nullopt;
                   };
                   io.grad_input = out(0);
                   io.grad_weight = out(1);
                   io.grad_bias = out(2);
                   return kernels::build_convolution_backward(inv.name, io, spec_of(inv),
                                                              inv.core());
                 },
                 [](const OpInvocation& inv) {
                   const at::Tensor g = inv.tensor(0);
                   return g.defined() && c10::isFloatingType(g.scalar_type()) &&
                          supported(inv, inv.tensor(1), inv.tensor(2), g.sizes().vec());
                 }});
  return ops;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&native_boxed_kernel>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&native_boxed_kernel>());
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace neuronsim::backend
