#pragma once
// How a native neuron op runs ("fast" mode, docs/design.md): its values are computed by ATen's
// CPU kernel on zero-copy views of the device tensors, and its time by the kernel library's ISA
// program for the op, run through the device model's timing. 64-bit data is computed at 32 bits
// (rounded in and out) unless NEURON_SIM_EXACT_64BIT=1, as TorchNeuron documents for the device.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/native_ops.h"

namespace neuronsim::backend {

/// The boxed kernel every native op is registered with.
void native_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

/// Launches an op's programs on its device, charging the host launch overhead. `functional`
/// runs them in full mode (ISA mode: the programs compute the values). `validated`: they come
/// from the program cache (validated on their first launch).
void launch_programs(const c10::Device& device, const std::vector<device_model::Program>& programs,
                     bool functional, bool validated = false);
/// ISA mode is on for this process (NEURON_SIM_MODE=isa or neuronsim._C._set_isa_mode).
bool isa_mode();

}  // namespace neuronsim::backend
