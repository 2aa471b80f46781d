// convolution and convolution_backward (rules: kernels/src/ops/convolution.cpp) are
// CompositeExplicitAutograd in ATen (no CPU kernel of their own), so they are registered here for
// PrivateUse1 directly; the boxed native kernel computes their values with the composite on CPU
// views. PrivateUse1's _convolution path (convolution_overrideable) leads back to them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/native_boxed.h"

namespace neuronsim::backend {
namespace {

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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&native_boxed_kernel>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&native_boxed_kernel>());
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace neuronsim::backend
