#pragma once
// at::Tensor <-> the kernel library's TensorDesc, and zero-copy CPU views of device tensors
// (simulated HBM is host-addressable).
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::backend {

/// The device dtype a torch dtype is computed in; nullopt for types the device has no native
/// support for (complex, qint, ...). 64-bit types map to their 32-bit counterparts.
std::optional<device_model::DType> device_dtype(c10::ScalarType t);
bool is_64bit(c10::ScalarType t);

/// The HBM byte address of device memory (the runtime's, looked up under its lock).
using HbmAddressOf = std::function<uint64_t(const void*)>;

/// Describes a neuron tensor for the kernel library.
kernels::TensorDesc describe(const at::Tensor& t, const HbmAddressOf& hbm_address);

/// Any neuron tensor as bytes (a trailing dim of element size): for moving data of dtypes the
/// device does not compute with (complex).
kernels::TensorDesc describe_bytes(const at::Tensor& t, const HbmAddressOf& hbm_address);

/// A CPU tensor aliasing a neuron tensor's memory (same sizes, strides, dtype, conj/neg bits).
at::Tensor cpu_view(const at::Tensor& t);

inline bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone();
}

// Calls fn on every tensor inside an IValue (tensor, tensor list, optional-tensor list).
template <typename Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) fn(e.toTensor());
    }
  }
}

}  // namespace neuronsim::backend
