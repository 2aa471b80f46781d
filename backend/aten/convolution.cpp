// Convolutions take the CPU fallback. PrivateUse1's _convolution dispatches to the
// *_overrideable ops, whose default kernels raise; these route them to ATen's CPU convolution,
// counted as fallbacks with their data crossing the simulated host link.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "accelerator/context.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"

namespace neuronsim::backend {
namespace {

at::Tensor to_host(const at::Tensor& t) {
  return t.defined() ? t.cpu() : t;
}

void charge_host_work() {
  with_runtime([](runtime::Runtime& r) {
    r.synchronize();
    r.host_advance(sim::SimTime::from_ns(r.device().params().host.cpu_fallback_overhead_ns));
    return 0;
  });
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                       c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  OpTracker::get().record_fallback("aten::convolution", "");
  OpScope scope("aten::convolution (CPU fallback)", {input, weight});
  charge_host_work();
  const std::optional<at::Tensor> b =
      bias && bias->defined() ? std::optional(to_host(*bias)) : std::nullopt;
  at::Tensor out = at::convolution_symint(to_host(input), to_host(weight), b, stride, padding,
                                          dilation, transposed, output_padding, std::move(groups));
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  OpTracker::get().record_fallback("aten::convolution_backward", "");
  OpScope scope("aten::convolution_backward (CPU fallback)", {grad_output, input, weight});
  charge_host_work();
  const c10::SymInt out_channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  std::vector<c10::SymInt> bias_sizes{out_channels};
  auto [gi, gw, gb] = at::convolution_backward_symint(
      to_host(grad_output), to_host(input), to_host(weight), c10::SymIntArrayRef(bias_sizes),
      stride, padding, dilation, transposed, output_padding, std::move(groups), output_mask);
  const c10::Device dev = input.device();
  return {gi.defined() ? gi.to(dev) : gi, gw.defined() ? gw.to(dev) : gw,
          gb.defined() ? gb.to(dev) : gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

}  // namespace neuronsim::backend
