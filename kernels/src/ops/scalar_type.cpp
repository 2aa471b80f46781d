#include "neuronsim/kernels/ops/scalar_type.h"

#include <iterator>

namespace neuronsim::kernels::ops {
namespace {

struct TypeInfo {
  ScalarType type;
  std::string_view name;
  int size;
};
// PyTorch's dtype names (str(torch.float32) without "torch.").
constexpr TypeInfo kTypes[] = {
    {ScalarType::kBool, "bool", 1},
    {ScalarType::kUInt8, "uint8", 1},
    {ScalarType::kInt8, "int8", 1},
    {ScalarType::kInt16, "int16", 2},
    {ScalarType::kInt32, "int32", 4},
    {ScalarType::kInt64, "int64", 8},
    {ScalarType::kFloat16, "float16", 2},
    {ScalarType::kBFloat16, "bfloat16", 2},
    {ScalarType::kFloat32, "float32", 4},
    {ScalarType::kFloat64, "float64", 8},
    {ScalarType::kFloat8E4M3, "float8_e4m3fn", 1},
    {ScalarType::kFloat8E5M2, "float8_e5m2", 1},
    {ScalarType::kComplex64, "complex64", 8},
    {ScalarType::kComplex128, "complex128", 16},
};

const TypeInfo* info(ScalarType t) {
  for (const TypeInfo& i : kTypes) {
    if (i.type == t) return &i;
  }
  return nullptr;
}

}  // namespace

int element_size(ScalarType t) {
  const TypeInfo* i = info(t);
  return i ? i->size : 0;
}

std::optional<device_model::DType> device_dtype(ScalarType t) {
  using device_model::DType;
  switch (t) {
    case ScalarType::kFloat32:
    case ScalarType::kFloat64:  // computed at 32 bits
      return DType::kFp32;
    case ScalarType::kBFloat16:
      return DType::kBf16;
    case ScalarType::kFloat16:
      return DType::kFp16;
    case ScalarType::kFloat8E4M3:
      return DType::kFp8E4M3;
    case ScalarType::kFloat8E5M2:
      return DType::kFp8E5M2;
    case ScalarType::kInt32:
    case ScalarType::kInt64:  // computed at 32 bits
      return DType::kInt32;
    case ScalarType::kInt16:
      return DType::kInt16;
    case ScalarType::kInt8:
      return DType::kInt8;
    case ScalarType::kUInt8:
    case ScalarType::kBool:
      return DType::kUint8;
    default:
      return std::nullopt;
  }
}

std::string_view type_name(ScalarType t) {
  const TypeInfo* i = info(t);
  return i ? i->name : "other";
}

ScalarType parse_type_name(std::string_view name) {
  for (const TypeInfo& i : kTypes) {
    if (i.name == name) return i.type;
  }
  return ScalarType::kOther;
}

}  // namespace neuronsim::kernels::ops
