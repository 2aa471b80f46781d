#include "neuronsim/device_model/dtype.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace neuronsim::device_model {
namespace {

/// A small IEEE-like float format. `finite_nan_only` is the OCP "fn" layout: no infinities, the
/// all-ones exponent holds normal numbers except the all-ones pattern, which is NaN.
struct MiniFloat {
  int exp_bits;
  int man_bits;
  bool finite_nan_only;

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int min_normal_exp() const { return 1 - bias(); }
  uint32_t nan_bits() const {
    return finite_nan_only ? ((1u << (exp_bits + man_bits)) - 1)
                           : ((((1u << exp_bits) - 1) << man_bits) | (1u << (man_bits - 1)));
  }
  uint32_t inf_bits() const { return ((1u << exp_bits) - 1) << man_bits; }
  double max_finite() const {
    int max_field = finite_nan_only ? (1 << exp_bits) - 1 : (1 << exp_bits) - 2;
    double max_man = finite_nan_only ? (2.0 - 2.0 * std::ldexp(1.0, -man_bits))
                                     : (2.0 - std::ldexp(1.0, -man_bits));
    return max_man * std::ldexp(1.0, max_field - bias());
  }

  uint32_t encode(float f) const {
    const uint32_t sign = std::signbit(f) ? 1u << (exp_bits + man_bits) : 0u;
    if (std::isnan(f)) return nan_bits();
    double a = std::fabs(static_cast<double>(f));
    if (std::isinf(a)) return sign | (finite_nan_only ? nan_bits() : inf_bits());
    if (a == 0.0) return sign;
    int e = std::ilogb(a);
    int q_exp = std::max(e, min_normal_exp()) - man_bits;
    // Exact in double: a has 24 significant bits and q is a power of two.
    double m = std::nearbyint(std::ldexp(a, -q_exp));  // ties to even (default rounding mode)
    double v = std::ldexp(m, q_exp);
    if (v > max_finite()) return sign | (finite_nan_only ? nan_bits() : inf_bits());
    if (v == 0.0) return sign;
    int ve = std::ilogb(v);
    if (ve < min_normal_exp()) {
      return sign | static_cast<uint32_t>(std::ldexp(v, man_bits - min_normal_exp()));
    }
    uint32_t field = static_cast<uint32_t>(ve + bias());
    uint32_t man = static_cast<uint32_t>(std::ldexp(v, man_bits - ve)) - (1u << man_bits);
    return sign | (field << man_bits) | man;
  }

  float decode(uint32_t bits) const {
    const bool neg = (bits >> (exp_bits + man_bits)) & 1u;
    const uint32_t field = (bits >> man_bits) & ((1u << exp_bits) - 1);
    const uint32_t man = bits & ((1u << man_bits) - 1);
    double v;
    if (finite_nan_only && (bits & ((1u << (exp_bits + man_bits)) - 1)) == nan_bits()) {
      return std::numeric_limits<float>::quiet_NaN();
    }
    if (!finite_nan_only && field == (1u << exp_bits) - 1) {
      if (man != 0) return std::numeric_limits<float>::quiet_NaN();
      v = std::numeric_limits<double>::infinity();
    } else if (field == 0) {
      v = std::ldexp(static_cast<double>(man), min_normal_exp() - man_bits);
    } else {
      v = std::ldexp(static_cast<double>(man + (1u << man_bits)),
                     static_cast<int>(field) - bias() - man_bits);
    }
    return static_cast<float>(neg ? -v : v);
  }
};

constexpr MiniFloat kFp16{5, 10, false};
constexpr MiniFloat kE4M3{4, 3, true};
constexpr MiniFloat kE5M2{5, 2, false};

template <typename Fn>
std::array<float, 256> make_table8(Fn fn) {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = fn(static_cast<uint32_t>(i));
  return t;
}

const std::array<float, 256>& e4m3_table() {
  static const auto t = make_table8([](uint32_t b) { return kE4M3.decode(b); });
  return t;
}
const std::array<float, 256>& e5m2_table() {
  static const auto t = make_table8([](uint32_t b) { return kE5M2.decode(b); });
  return t;
}
const std::vector<float>& fp16_table() {
  static const std::vector<float> t = [] {
    std::vector<float> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = kFp16.decode(i);
    return v;
  }();
  return t;
}

template <typename T>
T read_as(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void write_as(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <typename I>
I float_to_int_saturating(float v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(static_cast<double>(v));
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

// int64 -> fp32 rounded to odd (truncate, then set the last bit if anything was dropped).
// Narrowing that to a type with at most 22 significant bits rounds exactly once to nearest-even,
// where a plain int -> fp32 -> narrow conversion would round twice.
float int_to_float_round_to_odd(int64_t v) {
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int shift = std::max(0, static_cast<int>(std::bit_width(mag)) - 24);
  uint64_t q = mag >> shift;
  if ((q << shift) != mag) q |= 1;
  const float f = std::ldexp(static_cast<float>(q), shift);
  return v < 0 ? -f : f;
}

}  // namespace

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

uint16_t float_to_bf16_bits(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  if (std::isnan(v)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep sign, quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}
uint16_t float_to_fp16_bits(float v) {
  return static_cast<uint16_t>(kFp16.encode(v));
}
float fp16_bits_to_float(uint16_t b) {
  return fp16_table()[b];
}
uint8_t float_to_fp8_e4m3_bits(float v) {
  return static_cast<uint8_t>(kE4M3.encode(v));
}
float fp8_e4m3_bits_to_float(uint8_t b) {
  return e4m3_table()[b];
}
uint8_t float_to_fp8_e5m2_bits(float v) {
  return static_cast<uint8_t>(kE5M2.encode(v));
}
float fp8_e5m2_bits_to_float(uint8_t b) {
  return e5m2_table()[b];
}

float load_float(const void* p, DType t) {
  switch (t) {
    case DType::kFp32:
      return read_as<float>(p);
    case DType::kBf16:
      return bf16_bits_to_float(read_as<uint16_t>(p));
    case DType::kFp16:
      return fp16_bits_to_float(read_as<uint16_t>(p));
    case DType::kFp8E4M3:
      return fp8_e4m3_bits_to_float(read_as<uint8_t>(p));
    case DType::kFp8E5M2:
      return fp8_e5m2_bits_to_float(read_as<uint8_t>(p));
    case DType::kInt32:
      return static_cast<float>(read_as<int32_t>(p));
    case DType::kInt16:
      return static_cast<float>(read_as<int16_t>(p));
    case DType::kInt8:
      return static_cast<float>(read_as<int8_t>(p));
    case DType::kUint8:
      return static_cast<float>(read_as<uint8_t>(p));
  }
  return 0.0f;
}

void store_float(void* p, DType t, float v) {
  switch (t) {
    case DType::kFp32:
      write_as(p, v);
      return;
    case DType::kBf16:
      write_as(p, float_to_bf16_bits(v));
      return;
    case DType::kFp16:
      write_as(p, float_to_fp16_bits(v));
      return;
    case DType::kFp8E4M3:
      write_as(p, float_to_fp8_e4m3_bits(v));
      return;
    case DType::kFp8E5M2:
      write_as(p, float_to_fp8_e5m2_bits(v));
      return;
    case DType::kInt32:
      write_as(p, float_to_int_saturating<int32_t>(v));
      return;
    case DType::kInt16:
      write_as(p, float_to_int_saturating<int16_t>(v));
      return;
    case DType::kInt8:
      write_as(p, float_to_int_saturating<int8_t>(v));
      return;
    case DType::kUint8:
      write_as(p, float_to_int_saturating<uint8_t>(v));
      return;
  }
}

int64_t load_int(const void* p, DType t) {
  switch (t) {
    case DType::kInt32:
      return read_as<int32_t>(p);
    case DType::kInt16:
      return read_as<int16_t>(p);
    case DType::kInt8:
      return read_as<int8_t>(p);
    case DType::kUint8:
      return read_as<uint8_t>(p);
    default: {
      float f = load_float(p, t);
      if (std::isnan(f)) return 0;
      return static_cast<int64_t>(std::trunc(static_cast<double>(f)));
    }
  }
}

void store_int(void* p, DType t, int64_t v) {
  switch (t) {
    case DType::kInt32:
      write_as(p, static_cast<int32_t>(static_cast<uint32_t>(v)));
      return;
    case DType::kInt16:
      write_as(p, static_cast<int16_t>(static_cast<uint16_t>(v)));
      return;
    case DType::kInt8:
      write_as(p, static_cast<int8_t>(static_cast<uint8_t>(v)));
      return;
    case DType::kUint8:
      write_as(p, static_cast<uint8_t>(v));
      return;
    case DType::kFp32:
      write_as(p, static_cast<float>(v));
      return;
    default:
      store_float(p, t, int_to_float_round_to_odd(v));
      return;
  }
}

float round_to(DType t, float v) {
  unsigned char buf[4];
  store_float(buf, t, v);
  return load_float(buf, t);
}

}  // namespace neuronsim::device_model
