#include "aten/device_tensor.h"

#include <ATen/Functions.h>

namespace neuronsim::backend {

std::optional<device_model::DType> device_dtype(c10::ScalarType t) {
  using device_model::DType;
  switch (t) {
    case c10::ScalarType::Float:
      return DType::kFp32;
    case c10::ScalarType::BFloat16:
      return DType::kBf16;
    case c10::ScalarType::Half:
      return DType::kFp16;
    case c10::ScalarType::Float8_e4m3fn:
      return DType::kFp8E4M3;
    case c10::ScalarType::Float8_e5m2:
      return DType::kFp8E5M2;
    case c10::ScalarType::Int:
      return DType::kInt32;
    case c10::ScalarType::Short:
      return DType::kInt16;
    case c10::ScalarType::Char:
      return DType::kInt8;
    case c10::ScalarType::Byte:
      return DType::kUint8;
    case c10::ScalarType::Bool:
      return DType::kUint8;
    case c10::ScalarType::Double:
      return DType::kFp32;  // computed at 32 bits
    case c10::ScalarType::Long:
      return DType::kInt32;  // computed at 32 bits
    default:
      return std::nullopt;
  }
}

bool is_64bit(c10::ScalarType t) {
  return t == c10::ScalarType::Double || t == c10::ScalarType::Long;
}

kernels::TensorDesc describe(const at::Tensor& t, const HbmAddressOf& hbm_address) {
  kernels::TensorDesc d;
  const auto dt = device_dtype(t.scalar_type());
  TORCH_CHECK(dt, "neuronsim: dtype ", t.scalar_type(), " has no device representation");
  d.dtype = *dt;
  // Only device tensors have HBM addresses; a timing builder handed a CPU operand is a bug.
  TORCH_CHECK(t.is_privateuseone(), "neuronsim: timing model was given a ", t.device(),
              " tensor; only neuron tensors have device addresses");
  const int64_t widen = is_64bit(t.scalar_type()) ? 2 : 1;  // low 32-bit words of 64-bit data
  d.address = hbm_address(t.data_ptr());
  d.sizes.assign(t.sizes().begin(), t.sizes().end());
  d.strides.reserve(t.dim());
  for (int64_t s : t.strides()) d.strides.push_back(s * widen);
  return d;
}

at::Tensor cpu_view(const at::Tensor& t) {
  if (!t.defined()) return t;
  at::Tensor v = at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
  // The lazy conjugate / negative bits are metadata: the view must carry them too.
  if (t.is_conj()) v = v._conj();
  if (t.is_neg()) v = v._neg_view();
  return v;
}

kernels::TensorDesc describe_bytes(const at::Tensor& t, const HbmAddressOf& hbm_address) {
  kernels::TensorDesc d;
  d.dtype = device_model::DType::kUint8;
  d.address = hbm_address(t.data_ptr());
  const int64_t es = static_cast<int64_t>(t.element_size());
  d.sizes.assign(t.sizes().begin(), t.sizes().end());
  d.sizes.push_back(es);
  for (int64_t s : t.strides()) d.strides.push_back(s * es);
  d.strides.push_back(1);
  return d;
}

}  // namespace neuronsim::backend
