// Fast mode's values (the default): ATen's CPU kernel on zero-copy views of the device tensors
// (host_kernel_call.h). Where the CPU kernel lacks a dtype the device computes with (integer
// histc), the CPU fallback's widened host computation gives the values (it rethrows if it
// cannot help); the time is still the native programs'.
#include "aten/cpu_fallback.h"
#include "aten/device_tensor.h"
#include "aten/host_kernel_call.h"
#include "aten/op_values.h"

namespace neuronsim::backend {
namespace {

class FastValues final : public ValuesMode {
 public:
  ValuesOutcome compute(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        const NativeOp& native, OpInvocation& inv) const override {
    ValuesOutcome out;
    if (run_host_kernel(op, stack, native, inv, &out.at32)) return out;
    run_on_host(op, stack);
    for (const auto& r : torch::jit::last(*stack, op.schema().returns().size())) {
      for_each_tensor(r, [&](const at::Tensor& t) { inv.outputs.push_back(t); });
    }
    return out;
  }
};

}  // namespace

const ValuesMode& fast_values() {
  static const FastValues mode;
  return mode;
}

}  // namespace neuronsim::backend
