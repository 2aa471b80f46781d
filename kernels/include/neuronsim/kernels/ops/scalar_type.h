#pragma once
// The framework's element types, as op rules tell them apart. The device computes in fewer types
// (device_model::DType): 64-bit data as its low 32-bit words, bool as uint8.
#include <cstdint>
#include <optional>
#include <string_view>

#include "neuronsim/device_model/dtype.h"

namespace neuronsim::kernels::ops {

enum class ScalarType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kFloat8E4M3,
  kFloat8E5M2,
  kComplex64,
  kComplex128,
  kOther,  // quantized and the rest: no device representation
};

constexpr bool is_floating(ScalarType t) {
  return t == ScalarType::kFloat16 || t == ScalarType::kBFloat16 || t == ScalarType::kFloat32 ||
         t == ScalarType::kFloat64 || t == ScalarType::kFloat8E4M3 || t == ScalarType::kFloat8E5M2;
}
constexpr bool is_integral(ScalarType t, bool include_bool) {
  return (include_bool && t == ScalarType::kBool) || t == ScalarType::kUInt8 ||
         t == ScalarType::kInt8 || t == ScalarType::kInt16 || t == ScalarType::kInt32 ||
         t == ScalarType::kInt64;
}
constexpr bool is_complex(ScalarType t) {
  return t == ScalarType::kComplex64 || t == ScalarType::kComplex128;
}
constexpr bool is_64bit(ScalarType t) {
  return t == ScalarType::kInt64 || t == ScalarType::kFloat64;
}
constexpr bool is_fp8(ScalarType t) {
  return t == ScalarType::kFloat8E4M3 || t == ScalarType::kFloat8E5M2;
}
/// Bytes per element in the framework (8 for 64-bit types, 1 for bool).
int element_size(ScalarType t);

/// The device type a framework type is computed in; nullopt for types the device cannot hold
/// (complex, quantized). 64-bit types map to their 32-bit counterparts, bool to uint8.
std::optional<device_model::DType> device_dtype(ScalarType t);

/// The framework's name ("float32", "bfloat16", "bool", "int64", ...) and back.
std::string_view type_name(ScalarType t);
ScalarType parse_type_name(std::string_view name);

}  // namespace neuronsim::kernels::ops
