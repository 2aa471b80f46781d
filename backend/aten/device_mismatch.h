#pragma once
// The words TorchNeuron uses for a tensor on another device type passed to a device op
// (torch_neuronx/python_ops/base.py, OperationImplementation.can_handle): "Non-scalar tensor
// arg1 is on cpu device, expected neuron", with the argument's position in the op's call
// (arg2[0] for an element of a tensor list, kwarg 'name' for a keyword-only argument).
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>

#include <cstdint>
#include <string>

namespace neuronsim::backend {

/// TorchNeuron's sentence for argument `arg` (element `element` of a list, or -1), ending in
/// ": " so that CUDA's sentence can follow it.
std::string torchneuron_device_mismatch(const c10::FunctionSchema& schema, size_t arg,
                                        int64_t element, const at::Tensor& t);

}  // namespace neuronsim::backend
