#pragma once
// Device data types and their conversions. Floating types narrow with round-to-nearest-even;
// a value beyond the largest finite number becomes inf (fp16, bf16, fp8_e5m2) or NaN (fp8_e4m3,
// which has no inf, as OCP E4M3FN). Integers narrow from float by truncation toward zero with
// saturation (NaN -> 0), and wrap when narrowed from wider integers.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace neuronsim::device_model {

enum class DType : uint8_t {
  kFp32,
  kBf16,
  kFp16,
  kFp8E4M3,
  kFp8E5M2,
  kInt32,
  kInt16,
  kInt8,
  kUint8
};

inline constexpr DType kAllDTypes[] = {DType::kFp32,    DType::kBf16,    DType::kFp16,
                                       DType::kFp8E4M3, DType::kFp8E5M2, DType::kInt32,
                                       DType::kInt16,   DType::kInt8,    DType::kUint8};

// Inline: the validator, the cost models and the timing path ask these for every operand of
// every instruction.
/// Bytes per element; 0 for a code that is not a DType.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFp32:
    case DType::kInt32:
      return 4;
    case DType::kBf16:
    case DType::kFp16:
    case DType::kInt16:
      return 2;
    case DType::kFp8E4M3:
    case DType::kFp8E5M2:
    case DType::kInt8:
    case DType::kUint8:
      return 1;
  }
  return 0;
}
constexpr std::string_view dtype_name(DType t) {
  constexpr std::string_view kNames[] = {"fp32",  "bf16",  "fp16", "fp8_e4m3", "fp8_e5m2",
                                         "int32", "int16", "int8", "uint8"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(kNames) ? kNames[i] : "?";
}
std::optional<DType> parse_dtype(std::string_view name);
constexpr bool is_fp8(DType t) {
  return t == DType::kFp8E4M3 || t == DType::kFp8E5M2;
}
constexpr bool is_float(DType t) {
  return t == DType::kFp32 || t == DType::kBf16 || t == DType::kFp16 || is_fp8(t);
}
constexpr bool is_integer(DType t) {
  return !is_float(t);
}

/// Reads one element as fp32 (integers convert exactly up to 2^24, then round to nearest).
float load_float(const void* p, DType t);
/// Writes one element, narrowing from fp32 as described above.
void store_float(void* p, DType t, float v);
/// Reads an integer element exactly (float types truncate toward zero).
int64_t load_int(const void* p, DType t);
/// Writes an integer element, wrapping to the type's width (float types round to nearest).
void store_int(void* p, DType t, int64_t v);

/// fp32 -> the nearest representable value of `t`, returned as fp32 (the "device rounding").
float round_to(DType t, float v);

// Bit-level conversions, exposed for tests.
uint16_t float_to_bf16_bits(float v);
float bf16_bits_to_float(uint16_t b);
uint16_t float_to_fp16_bits(float v);
float fp16_bits_to_float(uint16_t b);
uint8_t float_to_fp8_e4m3_bits(float v);
float fp8_e4m3_bits_to_float(uint8_t b);
uint8_t float_to_fp8_e5m2_bits(float v);
float fp8_e5m2_bits_to_float(uint8_t b);

}  // namespace neuronsim::device_model
