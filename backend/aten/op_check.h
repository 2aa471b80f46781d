#pragma once
// The checks a native op makes before anything runs: where it runs, and whether the device can
// hold its data.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>

namespace neuronsim::backend {

/// The device a native op runs on; nullopt when it takes the CPU fallback (no device tensor among
/// its arguments, or a dtype the device has no representation for, such as complex). As on
/// CUDA, CPU tensors mix with device tensors only as 0-dim scalars or advanced-indexing indices,
/// and tensors on another NeuronCore never do (a c10::Error otherwise). A CPU tensor written
/// into a device tensor (x[idx] = torch.tensor(9.0)) is uploaded first, as CUDA does: the
/// kernels read their values from device memory.
std::optional<c10::Device> native_device(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace neuronsim::backend
