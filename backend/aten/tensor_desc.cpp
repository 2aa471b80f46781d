#include "aten/tensor_desc.h"

#include <ATen/Functions.h>

#include "runtime/context.h"

namespace neuronsim::backend {

std::optional<device::DType> device_dtype(c10::ScalarType t) {
  using device::DType;
  switch (t) {
    case c10::ScalarType::Float: return DType::kFp32;
    case c10::ScalarType::BFloat16: return DType::kBf16;
    case c10::ScalarType::Half: return DType::kFp16;
    case c10::ScalarType::Float8_e4m3fn: return DType::kFp8E4M3;
    case c10::ScalarType::Float8_e5m2: return DType::kFp8E5M2;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Short: return DType::kInt16;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Byte: return DType::kUint8;
    case c10::ScalarType::Bool: return DType::kUint8;
    case c10::ScalarType::Double: return DType::kFp32;  // computed at 32 bits
    case c10::ScalarType::Long: return DType::kInt32;   // computed at 32 bits
    default: return std::nullopt;
  }
}

bool is_64bit(c10::ScalarType t) { return t == c10::ScalarType::Double || t == c10::ScalarType::Long; }

kernels::TensorDesc describe(const at::Tensor& t) {
  kernels::TensorDesc d;
  const auto dt = device_dtype(t.scalar_type());
  TORCH_CHECK(dt, "neuronsim: dtype ", t.scalar_type(), " has no device representation");
  d.dtype = *dt;
  const int64_t widen = is_64bit(t.scalar_type()) ? 2 : 1;  // low 32-bit words of 64-bit data
  d.address = runtime::Runtime::instance().hbm_address(t.data_ptr());
  d.sizes.assign(t.sizes().begin(), t.sizes().end());
  d.strides.reserve(t.dim());
  for (int64_t s : t.strides()) d.strides.push_back(s * widen);
  return d;
}

at::Tensor cpu_view(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

}  // namespace neuronsim::backend
