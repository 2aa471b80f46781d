#pragma once
// An op's CPU kernel run on zero-copy CPU views of its device arguments (simulated HBM is host
// memory), its results made device tensors again. 64-bit data is computed at 32 bits (rounded in
// and out) unless NEURON_SIM_EXACT_64BIT=1, as TorchNeuron documents for the device.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "aten/native_ops.h"

namespace neuronsim::backend {

/// 64-bit data is computed at 32 bits (NEURON_SIM_EXACT_64BIT is not 1).
bool emulate_64bit();

/// Runs `native.host_values` (ops without a CPU kernel) or the op's CPU kernel on the arguments
/// on `stack` (`inv.args`), leaving device returns in their place and the flattened returns in
/// `inv.outputs`. Returns false, with the stack holding `inv.args` again, when the CPU kernel
/// lacks a dtype the device computes with (c10::NotImplementedError). `at32`: 64-bit data was
/// rounded.
bool run_host_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const NativeOp& native, OpInvocation& inv, bool* at32);

}  // namespace neuronsim::backend
