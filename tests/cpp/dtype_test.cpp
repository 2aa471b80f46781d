// Conversions of dtype.h against independent references: hand-checked values, formula decoders,
// a nearest-value search for fp8, GCC's _Float16 (IEEE round-to-nearest-even) for fp16, and
// exhaustive decode -> encode round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "neuronsim/device_model/dtype.h"

namespace neuronsim::device_model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}
uint32_t to_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// fp32 inputs worth converting: a stride through every bit pattern (all exponents, both signs)
// plus random patterns.
std::vector<float> sampled_floats(uint32_t stride, size_t random_count, uint32_t seed) {
  std::vector<float> v;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += stride) v.push_back(from_bits(uint32_t(u)));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < random_count; ++i) v.push_back(from_bits(rng()));
  return v;
}

// Adds the exact midpoint between each adjacent pair of values, and its fp32 neighbours: the
// inputs where round-to-nearest-even decides.
void add_midpoints(const std::vector<double>& sorted_values, std::vector<float>& out) {
  for (size_t i = 0; i + 1 < sorted_values.size(); ++i) {
    const double mid = (sorted_values[i] + sorted_values[i + 1]) / 2;
    const float f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(f), mid) << "midpoint not exact in fp32";
    for (float s : {1.0f, -1.0f}) {
      out.push_back(s * f);
      out.push_back(s * std::nextafter(f, 0.0f));
      out.push_back(s * std::nextafter(f, kInf));
    }
  }
}

// ---------------------------------------------------------------- metadata

TEST(DtypeMeta, SizeNameParseAndKind) {
  struct Row {
    DType t;
    size_t size;
    const char* name;
    bool is_float, is_fp8;
  };
  const Row rows[] = {
      {DType::kFp32, 4, "fp32", true, false},       {DType::kBf16, 2, "bf16", true, false},
      {DType::kFp16, 2, "fp16", true, false},       {DType::kFp8E4M3, 1, "fp8_e4m3", true, true},
      {DType::kFp8E5M2, 1, "fp8_e5m2", true, true}, {DType::kInt32, 4, "int32", false, false},
      {DType::kInt16, 2, "int16", false, false},    {DType::kInt8, 1, "int8", false, false},
      {DType::kUint8, 1, "uint8", false, false},
  };
  ASSERT_EQ(std::size(rows), std::size(kAllDTypes));
  for (size_t i = 0; i < std::size(rows); ++i) {
    const Row& r = rows[i];
    EXPECT_EQ(kAllDTypes[i], r.t);
    EXPECT_EQ(dtype_size(r.t), r.size) << r.name;
    EXPECT_EQ(dtype_name(r.t), r.name);
    EXPECT_EQ(parse_dtype(r.name), r.t) << r.name;
    EXPECT_EQ(parse_dtype(dtype_name(r.t)), r.t);
    EXPECT_EQ(is_float(r.t), r.is_float) << r.name;
    EXPECT_EQ(is_integer(r.t), !r.is_float) << r.name;
    EXPECT_EQ(is_fp8(r.t), r.is_fp8) << r.name;
  }
  for (const char* bad : {"", "float32", "FP32", "fp8", "int64", "bf16 ", "uint16"}) {
    EXPECT_FALSE(parse_dtype(bad).has_value()) << "'" << bad << "'";
  }
}

// ---------------------------------------------------------------- bf16

// Independent bf16 rounding: the two candidates around x, nearest by exact double distance, ties
// to the even pattern; the candidate above the largest finite value is inf.
uint16_t ref_bf16(float x) {
  const uint32_t u = to_bits(x);
  const uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;  // same sign, magnitudes below/above
  const double a = std::fabs(static_cast<double>(x));
  const double lo_v = std::fabs(static_cast<double>(from_bits(lo)));
  const double hi_v = ((hi >> 23) & 0xFF) == 0xFF ? std::ldexp(1.0, 128)
                                                  : std::fabs(static_cast<double>(from_bits(hi)));
  const double dl = a - lo_v, dh = hi_v - a;
  const bool up = dh < dl || (dh == dl && ((lo >> 16) & 1u));
  return static_cast<uint16_t>((up ? hi : lo) >> 16);
}

TEST(DtypeBf16, KnownValuesAndTiesToEven) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3F800000, 0x3F80},  // 1.0
      {0x3F808000, 0x3F80},  // 1 + half ulp: tie, 0x3F80 is even
      {0x3F818000, 0x3F82},  // tie, 0x3F81 is odd -> up
      {0x3F808001, 0x3F81},  // just above the tie
      {0x3F817FFF, 0x3F81},  // just below the tie
      {0xBF808000, 0xBF80},  // negative tie
      {0x7F7F7FFF, 0x7F7F},  // stays at max finite
      {0x7F7F8000, 0x7F80},  // max finite + half ulp: tie to even = inf
      {0xFF7F8000, 0xFF80},  // -inf
      {0x7F800000, 0x7F80},  // inf
      {0x00000000, 0x0000},  // +0
      {0x80000000, 0x8000},  // -0
      {0x00008000, 0x0000},  // fp32 subnormal tie -> +0 (even)
      {0x00018000, 0x0002},  // subnormal tie, odd -> up
      {0x807FFFFF, 0x8080},  // largest negative subnormal rounds up to -min normal
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_bf16_bits(from_bits(c.in)), c.out) << std::hex << c.in;
  }
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(kNaN))));
  // A NaN whose payload sits only in the low 16 bits must not truncate to inf.
  const uint16_t n = float_to_bf16_bits(from_bits(0x7F800001));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(n))) << std::hex << n;
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(from_bits(0xFF800001)))));
}

TEST(DtypeBf16, EncodeMatchesIndependentRoundingOnSampledFloats) {
  std::vector<float> in = sampled_floats(4093, 200000, 1);
  std::mt19937 rng(2);
  for (int i = 0; i < 100000; ++i) {  // near the rounding boundary of random patterns
    const uint32_t hi = rng() & 0xFFFF0000u;
    for (uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      in.push_back(from_bits(hi | low));
  }
  size_t failures = 0;
  for (float x : in) {
    const uint16_t got = float_to_bf16_bits(x);
    if (std::isnan(x)) {
      if (!std::isnan(bf16_bits_to_float(got)) && ++failures < 10) ADD_FAILURE() << "NaN lost";
      continue;
    }
    const uint16_t want = ref_bf16(x);
    if (got != want && ++failures < 10) {
      ADD_FAILURE() << std::hex << "in " << to_bits(x) << " got " << got << " want " << want;
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST(DtypeBf16, ExhaustiveDecodeEncodeRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_bits_to_float(static_cast<uint16_t>(b));
    ASSERT_EQ(to_bits(f), b << 16) << std::hex << b;  // bf16 is the top half of fp32
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bf16_bits(f), b) << std::hex << b;
    }
  }
}

// ---------------------------------------------------------------- fp16

#ifdef __FLT16_MAX__
// GCC's _Float16 conversions on x86-64 are IEEE binary16 with round-to-nearest-even.
uint16_t ref_fp16_bits(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float ref_fp16_value(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
#else
// Independent formula: decode by definition, encode by nearest search over the decoded values.
float ref_fp16_value(uint16_t b) {
  const int e = (b >> 10) & 31, m = b & 1023;
  const double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? kNaN : static_cast<float>(s * INFINITY);
  if (e == 0) return static_cast<float>(s * std::ldexp(m, -24));
  return static_cast<float>(s * std::ldexp(1024 + m, e - 25));
}
uint16_t ref_fp16_bits(float x) {
  if (std::isnan(x)) return 0x7E00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  // Codes 0..0x7C00 are monotonic in value; 0x7C00 stands for the first value past the max.
  uint32_t lo = 0, hi = 0x7C00;
  auto val = [](uint32_t c) { return c == 0x7C00 ? 65536.0 : double(ref_fp16_value(c)); };
  if (a >= 65536.0) return sign | 0x7C00;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    (val(mid) <= a ? lo : hi) = mid;
  }
  const double dl = a - val(lo), dh = val(hi) - a;
  const uint32_t c = (dh < dl || (dh == dl && (lo & 1))) ? hi : lo;
  return static_cast<uint16_t>(sign | c);
}
#endif

TEST(DtypeFp16, DecodeMatchesReferenceForAllCodes) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float got = fp16_bits_to_float(static_cast<uint16_t>(b));
    const float want = ref_fp16_value(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(to_bits(got), to_bits(want)) << std::hex << b;
    }
  }
  EXPECT_EQ(fp16_bits_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_bits_to_float(0x7C00), kInf);
  EXPECT_EQ(to_bits(fp16_bits_to_float(0x8000)), 0x80000000u);
}

TEST(DtypeFp16, EncodeMatchesReferenceOnSampledFloatsAndTies) {
  std::vector<float> in = sampled_floats(6143, 100000, 3);
  std::vector<double> values;  // every non-negative finite fp16 value, ascending
  for (uint32_t b = 0; b < 0x7C00; ++b) values.push_back(ref_fp16_value(static_cast<uint16_t>(b)));
  values.push_back(65536.0);  // the overflow boundary: 65520 is the tie with the max
  add_midpoints(values, in);
  size_t failures = 0;
  for (float x : in) {
    const uint16_t got = float_to_fp16_bits(x);
    if (std::isnan(x)) {
      if (!std::isnan(fp16_bits_to_float(got)) && ++failures < 10) ADD_FAILURE() << "NaN lost";
      continue;
    }
    const uint16_t want = ref_fp16_bits(x);
    if (got != want && ++failures < 10) {
      ADD_FAILURE() << std::hex << "in " << to_bits(x) << " (" << std::dec << x << ") got "
                    << std::hex << got << " want " << want;
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << in.size();
}

TEST(DtypeFp16, KnownValues) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16_bits(65519.996f), 0x7BFF);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7C00);  // tie with the next binade: overflow to inf
  EXPECT_EQ(float_to_fp16_bits(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_fp16_bits(kInf), 0x7C00);
  EXPECT_EQ(float_to_fp16_bits(-kInf), 0xFC00);
  EXPECT_EQ(float_to_fp16_bits(1.0f + 0x1p-11f), 0x3C00);      // tie, even stays
  EXPECT_EQ(float_to_fp16_bits(1.0f + 3 * 0x1p-11f), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(float_to_fp16_bits(0x1p-24f), 0x0001);             // min subnormal
  EXPECT_EQ(float_to_fp16_bits(0x1p-25f), 0x0000);             // half of it: tie to 0
  EXPECT_EQ(float_to_fp16_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16_bits(3 * 0x1p-25f), 0x0002);         // subnormal tie to even
  EXPECT_EQ(float_to_fp16_bits(0x1p-14f - 0x1p-25f), 0x0400);  // rounds up to min normal
  EXPECT_EQ(float_to_fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16_bits(-1e-30f), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(float_to_fp16_bits(1e-30f), 0x0000);
  const uint16_t n = float_to_fp16_bits(kNaN);
  EXPECT_EQ(n & 0x7C00, 0x7C00);
  EXPECT_NE(n & 0x03FF, 0);
}

TEST(DtypeFp16, ExhaustiveDecodeEncodeRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = fp16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_bits_to_float(float_to_fp16_bits(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_fp16_bits(f), b) << std::hex << b;
    }
  }
}

// ---------------------------------------------------------------- fp8

struct Fp8Format {
  const char* name;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  float (*ref_decode)(uint8_t);
  uint8_t overflow_code;  // what a too-large magnitude becomes (sign added separately)
  double past_max;        // the value the code after the max finite one would have
};

// E4M3FN by definition: bias 7, no inf, S.1111.111 is NaN.
float ref_e4m3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double s = (b & 0x80) ? -1.0 : 1.0;
  if (e == 15 && m == 7) return kNaN;
  if (e == 0) return static_cast<float>(s * std::ldexp(m, -9));
  return static_cast<float>(s * std::ldexp(8 + m, e - 10));
}
// E5M2 by definition: IEEE-like, bias 15.
float ref_e5m2(uint8_t b) {
  const int e = (b >> 2) & 31, m = b & 3;
  const double s = (b & 0x80) ? -1.0 : 1.0;
  if (e == 31) return m ? kNaN : static_cast<float>(s * INFINITY);
  if (e == 0) return static_cast<float>(s * std::ldexp(m, -16));
  return static_cast<float>(s * std::ldexp(4 + m, e - 17));
}

const Fp8Format kE4M3{"e4m3", float_to_fp8_e4m3_bits, fp8_e4m3_bits_to_float, ref_e4m3, 0x7F, 480};
const Fp8Format kE5M2{"e5m2", float_to_fp8_e5m2_bits, fp8_e5m2_bits_to_float, ref_e5m2, 0x7C,
                      65536};

// Non-negative finite codes in ascending value order (codes 0x00.. are monotonic).
std::vector<uint8_t> finite_codes(const Fp8Format& f) {
  std::vector<uint8_t> c;
  for (int b = 0; b < 0x80; ++b) {
    if (std::isfinite(f.ref_decode(static_cast<uint8_t>(b)))) c.push_back(static_cast<uint8_t>(b));
  }
  return c;
}

// Nearest-value search with ties to the even code; the virtual code after the max finite one
// (value past_max) stands for overflow.
bool ref_fp8_encode(const Fp8Format& f, const std::vector<uint8_t>& codes, float x, uint8_t* out) {
  if (std::isnan(x)) return false;  // any NaN code
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  auto val = [&](size_t i) {
    return i < codes.size() ? double(f.ref_decode(codes[i])) : f.past_max;
  };
  size_t lo = 0;
  while (lo + 1 <= codes.size() && val(lo + 1) <= a) ++lo;
  uint8_t code;
  if (lo >= codes.size()) {
    code = f.overflow_code;
  } else {
    const double dl = a - val(lo), dh = val(lo + 1) - a;
    const uint32_t lo_code = codes[lo], hi_code = lo_code + 1;
    const bool up = dh < dl || (dh == dl && (lo_code & 1));
    code = (up && lo + 1 >= codes.size()) ? f.overflow_code
                                          : static_cast<uint8_t>(up ? hi_code : lo_code);
  }
  if (code == 0x7F && f.overflow_code == 0x7F) return false;  // E4M3 overflow: NaN
  *out = sign | code;
  return true;
}

TEST(DtypeFp8, DecodeMatchesDefinitionForAllCodes) {
  for (const Fp8Format* f : {&kE4M3, &kE5M2}) {
    for (int b = 0; b < 256; ++b) {
      const float got = f->decode(static_cast<uint8_t>(b));
      const float want = f->ref_decode(static_cast<uint8_t>(b));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f->name << " " << b;
      } else {
        EXPECT_EQ(to_bits(got), to_bits(want)) << f->name << " code " << b;
      }
    }
  }
  // Spot values that pin the layouts.
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x7E), 448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(0xFF)));
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x78), 256.0f);  // S.1111.000 is a normal number, not inf
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e5m2_bits_to_float(0x7B), 57344.0f);
  EXPECT_EQ(fp8_e5m2_bits_to_float(0x7C), kInf);
  EXPECT_EQ(fp8_e5m2_bits_to_float(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(fp8_e5m2_bits_to_float(0x7D)));
  EXPECT_EQ(fp8_e5m2_bits_to_float(0x01), 0x1p-16f);
  EXPECT_EQ(fp8_e5m2_bits_to_float(0x3C), 1.0f);
  EXPECT_EQ(to_bits(fp8_e5m2_bits_to_float(0x80)), 0x80000000u);
}

TEST(DtypeFp8, EncodeMatchesNearestSearchOnSampledFloatsAndTies) {
  for (const Fp8Format* f : {&kE4M3, &kE5M2}) {
    std::vector<float> in = sampled_floats(65521, 20000, 4);
    const std::vector<uint8_t> codes = finite_codes(*f);
    std::vector<double> values;
    for (uint8_t c : codes) values.push_back(f->ref_decode(c));
    values.push_back(f->past_max);
    add_midpoints(values, in);
    for (float x : {1e6f, 1e30f, kInf, -kInf, 1e-30f, -1e-30f, 0.0f, -0.0f}) in.push_back(x);
    std::mt19937 rng(5);  // dense random magnitudes across the fp8 range
    std::uniform_real_distribution<float> u(-20.0f, 17.0f);
    for (int i = 0; i < 20000; ++i) in.push_back((rng() & 1 ? -1 : 1) * std::exp2(u(rng)));
    size_t failures = 0;
    for (float x : in) {
      const uint8_t got = f->encode(x);
      uint8_t want;
      if (!ref_fp8_encode(*f, codes, x, &want)) {
        if (!std::isnan(f->decode(got)) && ++failures < 10) {
          ADD_FAILURE() << f->name << " " << x << " should be NaN, got code " << int(got);
        }
      } else if (got != want && ++failures < 10) {
        ADD_FAILURE() << f->name << " " << x << " (0x" << std::hex << to_bits(x) << ") got 0x"
                      << int(got) << " want 0x" << int(want);
      }
    }
    EXPECT_EQ(failures, 0u) << f->name;
  }
}

TEST(DtypeFp8, KnownValues) {
  // E4M3FN: max 448, no inf; overflow and inf become NaN.
  EXPECT_EQ(float_to_fp8_e4m3_bits(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-448.0f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3_bits(464.0f), 0x7E);  // tie with the (absent) 480: even 448
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(464.1f))));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(480.0f))));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(1e6f))));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(kInf))));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(-kInf))));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(kNaN))));
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.0625f), 0x38);         // tie between 1.0 and 1.125: even
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.1875f), 0x3A);         // tie between 1.125 and 1.25: even
  EXPECT_EQ(float_to_fp8_e4m3_bits(0x1p-10f), 0x00);        // half the min subnormal: tie to 0
  EXPECT_EQ(float_to_fp8_e4m3_bits(3 * 0x1p-10f), 0x02);    // subnormal tie to even
  EXPECT_EQ(float_to_fp8_e4m3_bits(7.5f * 0x1p-9f), 0x08);  // rounds up to min normal 2^-6
  EXPECT_EQ(float_to_fp8_e4m3_bits(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-1e-5f), 0x80);
  // E5M2: IEEE-like, overflow to inf.
  EXPECT_EQ(float_to_fp8_e5m2_bits(57344.0f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2_bits(61439.0f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2_bits(61440.0f), 0x7C);  // tie with 65536: even -> inf
  EXPECT_EQ(float_to_fp8_e5m2_bits(-1e9f), 0xFC);
  EXPECT_EQ(float_to_fp8_e5m2_bits(kInf), 0x7C);
  EXPECT_EQ(float_to_fp8_e5m2_bits(-kInf), 0xFC);
  EXPECT_TRUE(std::isnan(fp8_e5m2_bits_to_float(float_to_fp8_e5m2_bits(kNaN))));
  EXPECT_EQ(float_to_fp8_e5m2_bits(1.125f), 0x3C);  // tie between 1.0 and 1.25: even
  EXPECT_EQ(float_to_fp8_e5m2_bits(1.375f), 0x3E);  // tie between 1.25 and 1.5: even
  EXPECT_EQ(float_to_fp8_e5m2_bits(0x1p-16f), 0x01);
  EXPECT_EQ(float_to_fp8_e5m2_bits(0x1p-17f), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2_bits(3 * 0x1p-17f), 0x02);
  EXPECT_EQ(float_to_fp8_e5m2_bits(-0x1p-18f), 0x80);
}

TEST(DtypeFp8, ExhaustiveDecodeEncodeRoundTrip) {
  for (const Fp8Format* f : {&kE4M3, &kE5M2}) {
    int nans = 0;
    for (int b = 0; b < 256; ++b) {
      const float v = f->decode(static_cast<uint8_t>(b));
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(f->decode(f->encode(v)))) << f->name << " " << b;
      } else {
        EXPECT_EQ(f->encode(v), b) << f->name << " " << b;
      }
    }
    EXPECT_EQ(nans, f == &kE4M3 ? 2 : 6) << f->name;
  }
}

// ---------------------------------------------------------------- integers

TEST(DtypeIntStore, FloatToIntTruncatesTowardZeroAndSaturates) {
  struct Case {
    DType t;
    float in;
    int64_t out;
  };
  const Case cases[] = {
      {DType::kInt8, 3.9f, 3},
      {DType::kInt8, -3.9f, -3},
      {DType::kInt8, 127.9f, 127},
      {DType::kInt8, 128.0f, 127},
      {DType::kInt8, -128.9f, -128},
      {DType::kInt8, -1e30f, -128},
      {DType::kInt8, kNaN, 0},
      {DType::kInt8, kInf, 127},
      {DType::kInt8, -0.9f, 0},
      {DType::kUint8, -0.9f, 0},
      {DType::kUint8, -5.0f, 0},
      {DType::kUint8, 255.9f, 255},
      {DType::kUint8, 256.0f, 255},
      {DType::kUint8, -kInf, 0},
      {DType::kUint8, kNaN, 0},
      {DType::kInt16, 32767.5f, 32767},
      {DType::kInt16, -32768.5f, -32768},
      {DType::kInt16, 1e9f, 32767},
      {DType::kInt16, -1234.99f, -1234},
      {DType::kInt32, 2147483520.0f, 2147483520},
      {DType::kInt32, 2147483648.0f, 2147483647},
      {DType::kInt32, -2147483648.0f, -2147483648},
      {DType::kInt32, -3e9f, -2147483648},
      {DType::kInt32, kNaN, 0},
      {DType::kInt32, -kInf, -2147483648},
      {DType::kInt32, 16777217.0f, 16777216},
  };
  for (const Case& c : cases) {
    unsigned char buf[8];
    std::memset(buf, 0xAB, sizeof buf);
    store_float(buf, c.t, c.in);
    EXPECT_EQ(load_int(buf, c.t), c.out) << dtype_name(c.t) << " " << c.in;
    for (size_t i = dtype_size(c.t); i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << "overwrite";
  }
}

TEST(DtypeIntStore, IntToIntWrapsAndLoadsExactly) {
  struct Case {
    DType t;
    int64_t in, out;
  };
  const Case cases[] = {
      {DType::kInt8, 200, -56},
      {DType::kInt8, -129, 127},
      {DType::kInt8, 127, 127},
      {DType::kUint8, -1, 255},
      {DType::kUint8, 256, 0},
      {DType::kUint8, 300, 44},
      {DType::kInt16, 70000, 4464},
      {DType::kInt16, -32769, 32767},
      {DType::kInt16, -5, -5},
      {DType::kInt32, 4294967301, 5},
      {DType::kInt32, 2147483648, -2147483648},
      {DType::kInt32, -2147483649, 2147483647},
      {DType::kInt32, 16777217, 16777217},
  };
  for (const Case& c : cases) {
    unsigned char buf[8];
    std::memset(buf, 0xCD, sizeof buf);
    store_int(buf, c.t, c.in);
    EXPECT_EQ(load_int(buf, c.t), c.out) << dtype_name(c.t) << " " << c.in;
    for (size_t i = dtype_size(c.t); i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xCD) << "overwrite";
  }
  // Little-endian two's complement layout.
  unsigned char b[4];
  store_int(b, DType::kInt16, 0x1234);
  EXPECT_EQ(b[0], 0x34);
  EXPECT_EQ(b[1], 0x12);
  store_int(b, DType::kInt32, -2);
  EXPECT_EQ(b[0], 0xFE);
  EXPECT_EQ(b[3], 0xFF);
  // load_float of integers: exact below 2^24, nearest-even above.
  int32_t i32 = 16777217;
  EXPECT_EQ(load_float(&i32, DType::kInt32), 16777216.0f);
  i32 = 16777219;
  EXPECT_EQ(load_float(&i32, DType::kInt32), 16777220.0f);
  i32 = -2147483647;
  EXPECT_EQ(load_float(&i32, DType::kInt32), -2147483648.0f);
  uint8_t u8 = 255;
  EXPECT_EQ(load_float(&u8, DType::kUint8), 255.0f);
  int8_t i8 = -128;
  EXPECT_EQ(load_float(&i8, DType::kInt8), -128.0f);
}

TEST(DtypeIntStore, LoadIntOfFloatTypesTruncates) {
  struct Case {
    DType t;
    float in;
    int64_t out;
  };
  const Case cases[] = {
      {DType::kFp32, 2.9f, 2},          {DType::kFp32, -2.9f, -2},     {DType::kFp32, -0.5f, 0},
      {DType::kFp32, 3e9f, 3000000000}, {DType::kFp32, kNaN, 0},       {DType::kBf16, 257.0f, 256},
      {DType::kBf16, -1.5f, -1},        {DType::kFp16, 1000.7f, 1000}, {DType::kFp16, kNaN, 0},
      {DType::kFp8E4M3, -3.5f, -3},     {DType::kFp8E5M2, 7.0f, 7},
  };
  for (const Case& c : cases) {
    unsigned char buf[4];
    store_float(buf, c.t, c.in);
    EXPECT_EQ(load_int(buf, c.t), c.out) << dtype_name(c.t) << " " << c.in;
  }
}

// Integer -> float type: one rounding to nearest-even of the exact integer.
TEST(DtypeIntStore, StoreIntToFloatTypesRoundsOnceToNearest) {
  struct Case {
    DType t;
    int64_t in;
    double out;  // inf/NaN spelled as such
  };
  const Case cases[] = {
      {DType::kFp32, 16777217, 16777216.0},
      {DType::kFp32, 16777219, 16777220.0},
      {DType::kFp32, -2147483647, -2147483648.0},
      {DType::kBf16, 257, 256.0},
      {DType::kBf16, 259, 260.0},
      {DType::kBf16, 385, 384.0},
      // 2^25 + 2^17 + 1 is just above the bf16 tie; via an fp32 rounding (to 2^25 + 2^17) it
      // would land on the tie and go to even 2^25.
      {DType::kBf16, (1 << 25) + (1 << 17) + 1, (1 << 25) + (1 << 18)},
      {DType::kBf16, -((1 << 25) + (1 << 17) + 1), -((1 << 25) + (1 << 18))},
      {DType::kBf16, (1 << 25) + (1 << 17), 1 << 25},  // an exact tie: even
      {DType::kBf16, 2147483647, 2147483648.0},
      {DType::kFp16, 2049, 2048.0},
      {DType::kFp16, 2051, 2052.0},
      {DType::kFp16, 65519, 65504.0},
      {DType::kFp16, 65520, INFINITY},
      {DType::kFp16, -100000, -INFINITY},
      {DType::kFp8E4M3, 464, 448.0},
      {DType::kFp8E4M3, 17, 16.0},
      {DType::kFp8E4M3, 19, 20.0},
      {DType::kFp8E5M2, 61439, 57344.0},
      {DType::kFp8E5M2, 61440, INFINITY},
      {DType::kFp8E5M2, (int64_t{1} << 40) + 1, INFINITY},
  };
  for (const Case& c : cases) {
    unsigned char buf[4];
    store_int(buf, c.t, c.in);
    EXPECT_EQ(static_cast<double>(load_float(buf, c.t)), c.out) << dtype_name(c.t) << " " << c.in;
  }
  unsigned char buf[4];
  store_int(buf, DType::kFp8E4M3, 465);
  EXPECT_TRUE(std::isnan(load_float(buf, DType::kFp8E4M3)));
}

// Every int32 value into bf16 against an integer-arithmetic nearest-even reference.
TEST(DtypeIntStore, StoreIntToBf16MatchesIntegerRoundingOnRandomInt32) {
  std::mt19937 rng(6);
  size_t failures = 0;
  for (int i = 0; i < 200000; ++i) {
    const int64_t v = static_cast<int32_t>(rng());
    const uint64_t a = static_cast<uint64_t>(v < 0 ? -v : v);
    uint64_t r = a;
    if (a >= 256) {  // keep 8 significant bits
      const int shift = std::bit_width(a) - 8;
      uint64_t q = a >> shift;
      const uint64_t rem = a & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
      r = q << shift;
    }
    const double want = v < 0 ? -double(r) : double(r);
    unsigned char buf[2];
    store_int(buf, DType::kBf16, v);
    if (static_cast<double>(load_float(buf, DType::kBf16)) != want && ++failures < 10) {
      ADD_FAILURE() << v << " -> " << load_float(buf, DType::kBf16) << " want " << want;
    }
  }
  EXPECT_EQ(failures, 0u);
}

// ---------------------------------------------------------------- round_to / load / store

TEST(DtypeRoundTo, MatchesBitConversionsAndIsIdempotent) {
  const std::vector<float> in = sampled_floats(1048573, 20000, 7);
  for (float x : in) {
    EXPECT_EQ(to_bits(round_to(DType::kFp32, x)), to_bits(x));
    const float expect[] = {bf16_bits_to_float(float_to_bf16_bits(x)),
                            fp16_bits_to_float(float_to_fp16_bits(x)),
                            fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(x)),
                            fp8_e5m2_bits_to_float(float_to_fp8_e5m2_bits(x))};
    const DType ts[] = {DType::kBf16, DType::kFp16, DType::kFp8E4M3, DType::kFp8E5M2};
    for (int k = 0; k < 4; ++k) {
      const float r = round_to(ts[k], x);
      if (std::isnan(expect[k])) {
        ASSERT_TRUE(std::isnan(r)) << dtype_name(ts[k]) << " " << x;
        continue;
      }
      ASSERT_EQ(to_bits(r), to_bits(expect[k])) << dtype_name(ts[k]) << " " << x;
      ASSERT_EQ(to_bits(round_to(ts[k], r)), to_bits(r)) << "not idempotent";
    }
    for (DType t : {DType::kInt32, DType::kInt16, DType::kInt8, DType::kUint8}) {
      const float r = round_to(t, x);
      ASSERT_EQ(r, std::trunc(r));
      ASSERT_EQ(round_to(t, r), r);
    }
  }
  EXPECT_EQ(round_to(DType::kInt8, 3.7f), 3.0f);
  EXPECT_EQ(round_to(DType::kInt8, -300.0f), -128.0f);
  EXPECT_EQ(round_to(DType::kUint8, -3.0f), 0.0f);
  EXPECT_EQ(round_to(DType::kInt32, 1e10f), 2147483648.0f);  // INT32_MAX read back as fp32
  EXPECT_EQ(round_to(DType::kInt32, kNaN), 0.0f);
  EXPECT_EQ(round_to(DType::kBf16, 1.00390625f), 1.0f);
  EXPECT_EQ(round_to(DType::kFp16, 0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to(DType::kFp8E4M3, 0.3f), 0.3125f);
  EXPECT_EQ(round_to(DType::kFp8E5M2, 0.3f), 0.3125f);
  EXPECT_EQ(round_to(DType::kFp8E5M2, 1e6f), kInf);
  EXPECT_TRUE(std::isnan(round_to(DType::kFp8E4M3, 500.0f)));
  EXPECT_TRUE(std::signbit(round_to(DType::kFp8E4M3, -1e-9f)));
}

TEST(DtypeLoadStore, StoreFloatWritesOnlyItsBytesInLittleEndianLayout) {
  std::mt19937 rng(8);
  for (DType t : kAllDTypes) {
    for (int i = 0; i < 2000; ++i) {
      const float x = std::ldexp(static_cast<float>(static_cast<int32_t>(rng())) / 2147483648.0f,
                                 static_cast<int>(rng() % 40) - 20);
      unsigned char buf[8];
      std::memset(buf, 0x5A, sizeof buf);
      store_float(buf, t, x);
      for (size_t k = dtype_size(t); k < sizeof buf; ++k) ASSERT_EQ(buf[k], 0x5A) << dtype_name(t);
      uint32_t raw = 0;
      std::memcpy(&raw, buf, dtype_size(t));
      const float back = load_float(buf, t);
      switch (t) {
        case DType::kFp32:
          ASSERT_EQ(raw, to_bits(x));
          break;
        case DType::kBf16:
          ASSERT_EQ(raw, float_to_bf16_bits(x));
          break;
        case DType::kFp16:
          ASSERT_EQ(raw, float_to_fp16_bits(x));
          break;
        case DType::kFp8E4M3:
          ASSERT_EQ(raw, float_to_fp8_e4m3_bits(x));
          break;
        case DType::kFp8E5M2:
          ASSERT_EQ(raw, float_to_fp8_e5m2_bits(x));
          break;
        default:
          ASSERT_EQ(load_int(buf, t), static_cast<int64_t>(back));
          break;
      }
      if (!std::isnan(back)) {
        ASSERT_EQ(to_bits(back), to_bits(round_to(t, x))) << dtype_name(t);
      }
    }
  }
}

}  // namespace
}  // namespace neuronsim::device_model
