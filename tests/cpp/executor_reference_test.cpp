// The function of every data opcode against a naive reference written here: random shapes,
// layouts (strided, permuted, reversed, broadcast), start partitions, offsets and dtypes, fixed
// seeds. The reference addresses elements from the access_pattern.h definition, reads and writes
// values with dtype.h's conversions (checked by dtype_test) and states each opcode's rounding:
// bit-exact where it is defined, a documented tolerance for transcendental functions. After each
// instruction the whole SBUF, PSUM and HBM window is compared, so stray writes fail too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "neuronsim/device_model/executor.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "test_util.h"

namespace neuronsim::device_model {
namespace {

constexpr uint32_t kParts = 128;
constexpr uint64_t kPartBytes = 8192;  // small on-chip memories keep whole-image compares cheap
constexpr uint64_t kSlotBytes = 2048;  // four operand slots per partition
constexpr uint64_t kHbmBytes = 1 << 20;
constexpr uint64_t kHbmSlot = 1 << 18;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const std::vector<DType> kAll(std::begin(kAllDTypes), std::end(kAllDTypes));
const std::vector<DType> kFloats = {DType::kFp32, DType::kBf16, DType::kFp16, DType::kFp8E4M3,
                                    DType::kFp8E5M2};
const std::vector<DType> kInts = {DType::kInt32, DType::kInt16, DType::kInt8, DType::kUint8};

// ------------------------------------------------------------------ addressing

// Byte offset of free element i (row-major) of partition p, from the definition in
// access_pattern.h.
int64_t ref_offset(const AccessPattern& ap, uint32_t p, uint64_t i) {
  int64_t elems = 0;
  for (int k = ap.ndims - 1; k >= 0; --k) {
    elems += static_cast<int64_t>(i % ap.dims[k].size) * ap.dims[k].stride;
    i /= ap.dims[k].size;
  }
  if (ap.space == MemSpace::kHbm) elems += static_cast<int64_t>(p) * ap.partition_stride;
  return static_cast<int64_t>(ap.offset) + elems * static_cast<int64_t>(dtype_size(ap.dtype));
}

// Base pointers of the three memories (real or a snapshot), bounds-checked element access.
struct View {
  uint8_t* sbuf;
  uint8_t* psum;
  uint8_t* hbm;

  uint8_t* at(const AccessPattern& ap, uint32_t p, uint64_t i) const {
    const int64_t off = ref_offset(ap, p, i);
    const int64_t es = static_cast<int64_t>(dtype_size(ap.dtype));
    if (ap.space == MemSpace::kHbm) {
      if (off < 0 || off + es > static_cast<int64_t>(kHbmBytes)) throw std::logic_error("hbm oob");
      return hbm + off;
    }
    if (off < 0 || off + es > static_cast<int64_t>(kPartBytes) ||
        ap.start_partition + p >= kParts) {
      throw std::logic_error("on-chip oob: " + ap.to_string());
    }
    uint8_t* base = ap.space == MemSpace::kSbuf ? sbuf : psum;
    return base + (ap.start_partition + p) * kPartBytes + off;
  }
  float f(const AccessPattern& ap, uint32_t p, uint64_t i) const {
    return load_float(at(ap, p, i), ap.dtype);
  }
  int64_t n(const AccessPattern& ap, uint32_t p, uint64_t i) const {
    return load_int(at(ap, p, i), ap.dtype);
  }
  void set_f(const AccessPattern& ap, uint32_t p, uint64_t i, float v) const {
    store_float(at(ap, p, i), ap.dtype, v);
  }
  void set_n(const AccessPattern& ap, uint32_t p, uint64_t i, int64_t v) const {
    store_int(at(ap, p, i), ap.dtype, v);
  }
};

struct Image {
  std::vector<uint8_t> sbuf, psum, hbm;
  View view() { return {sbuf.data(), psum.data(), hbm.data()}; }
};

// ------------------------------------------------------------------ reference semantics

// 32-bit two's-complement integer ALU on int32 operands.
int64_t ref_alu_int(AluOp op, int64_t a64, int64_t b64) {
  const int32_t a = static_cast<int32_t>(a64), b = static_cast<int32_t>(b64);
  const uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  switch (op) {
    case AluOp::kBypass:
      return a;
    case AluOp::kAdd:
      return static_cast<int32_t>(ua + ub);
    case AluOp::kSubtract:
      return static_cast<int32_t>(ua - ub);
    case AluOp::kMultiply:
      return static_cast<int32_t>(ua * ub);
    case AluOp::kDivide:  // x / 0 is defined as 0; INT32_MIN / -1 wraps
      if (b == 0) return 0;
      if (b == -1) return static_cast<int32_t>(0u - ua);
      return a / b;
    case AluOp::kMax:
      return std::max(a, b);
    case AluOp::kMin:
      return std::min(a, b);
    case AluOp::kPow: {  // negative exponents: trunc(1 / a^-b), with 1 / 0 defined as 0
      if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b % 2) ? -1 : 1) : 0);
      uint32_t r = 1, base = ua;
      for (uint32_t e = ub; e != 0; e >>= 1) {
        if (e & 1u) r *= base;
        base *= base;
      }
      return static_cast<int32_t>(r);
    }
    case AluOp::kMod:
      return (b == 0 || b == -1) ? 0 : a % b;  // sign of the dividend, as fmod
    case AluOp::kAbsMax: {  // |INT32_MIN| wraps to INT32_MIN like any int32 result
      const int64_t m = std::max(std::abs(int64_t{a}), std::abs(int64_t{b}));
      return static_cast<int32_t>(static_cast<uint32_t>(m));
    }
    case AluOp::kIsEqual:
      return a == b;
    case AluOp::kNotEqual:
      return a != b;
    case AluOp::kIsGt:
      return a > b;
    case AluOp::kIsGe:
      return a >= b;
    case AluOp::kIsLt:
      return a < b;
    case AluOp::kIsLe:
      return a <= b;
    case AluOp::kLogicalAnd:
      return a != 0 && b != 0;
    case AluOp::kLogicalOr:
      return a != 0 || b != 0;
    case AluOp::kLogicalXor:
      return (a != 0) != (b != 0);
    case AluOp::kBitwiseAnd:
      return a & b;
    case AluOp::kBitwiseOr:
      return a | b;
    case AluOp::kBitwiseXor:
      return a ^ b;
    case AluOp::kShiftLeft:
      return static_cast<int32_t>(ua << (ub & 31u));
    case AluOp::kShiftRight:
      return static_cast<int32_t>(ua >> (ub & 31u));  // logical
  }
  throw std::logic_error("op");
}

// fp32 ALU. Arithmetic is done in double and rounded once, which equals the correctly rounded
// fp32 operation for + - * / (53 >= 2 * 24 + 2). max/min propagate NaN and keep the first
// operand on ties (only visible as the sign of a zero).
float ref_alu_float(AluOp op, float a, float b) {
  const double x = a, y = b;
  const bool any_nan = std::isnan(a) || std::isnan(b);
  switch (op) {
    case AluOp::kBypass:
      return a;
    case AluOp::kAdd:
      return static_cast<float>(x + y);
    case AluOp::kSubtract:
      return static_cast<float>(x - y);
    case AluOp::kMultiply:
      return static_cast<float>(x * y);
    case AluOp::kDivide:
      return static_cast<float>(x / y);
    case AluOp::kMax:
      return any_nan ? kNaN : (b > a ? b : a);
    case AluOp::kMin:
      return any_nan ? kNaN : (b < a ? b : a);
    case AluOp::kPow:
      return static_cast<float>(std::pow(x, y));  // compared within 1 ulp
    case AluOp::kMod:
      return static_cast<float>(std::fmod(x, y));  // exact
    case AluOp::kAbsMax:
      return any_nan ? kNaN : std::max(std::fabs(a), std::fabs(b));
    case AluOp::kIsEqual:
      return x == y;
    case AluOp::kNotEqual:
      return x != y;
    case AluOp::kIsGt:
      return x > y;
    case AluOp::kIsGe:
      return x >= y;
    case AluOp::kIsLt:
      return x < y;
    case AluOp::kIsLe:
      return x <= y;
    case AluOp::kLogicalAnd:
      return x != 0 && y != 0;
    case AluOp::kLogicalOr:
      return x != 0 || y != 0;
    case AluOp::kLogicalXor:
      return (x != 0) != (y != 0);
    default:  // bitwise on the float path: the truncated integer values (tests keep them int32)
      return static_cast<float>(ref_alu_int(op, static_cast<int64_t>(std::trunc(x)),
                                            static_cast<int64_t>(std::trunc(y))));
  }
}

bool is_bitwise(AluOp op) {
  return op == AluOp::kBitwiseAnd || op == AluOp::kBitwiseOr || op == AluOp::kBitwiseXor ||
         op == AluOp::kShiftLeft || op == AluOp::kShiftRight;
}

// Activation functions whose fp32 result is exactly defined (IEEE correctly rounded).
bool act_is_exact(ActFunc f) {
  switch (f) {
    case ActFunc::kCopy:
    case ActFunc::kRelu:
    case ActFunc::kSquare:
    case ActFunc::kAbs:
    case ActFunc::kSign:
    case ActFunc::kReciprocal:
    case ActFunc::kSqrt:
      return true;
    default:
      return false;
  }
}

// The activation's input: x * scale, plus the bias unless it is zero (so -0.0 stays -0.0).
float scaled_plus_bias(float x, float scale, float bias) {
  const float scaled = static_cast<float>(double{x} * scale);
  return bias == 0.0f ? scaled : static_cast<float>(double{scaled} + double{bias});
}

float ref_act_exact(ActFunc f, float x) {
  const double d = x;
  switch (f) {
    case ActFunc::kCopy:
      return x;
    case ActFunc::kRelu:
      return x > 0 ? x : (std::isnan(x) ? x : 0.0f);  // relu(-0) = +0
    case ActFunc::kSquare:
      return static_cast<float>(d * d);
    case ActFunc::kAbs:
      return std::fabs(x);
    case ActFunc::kSign:
      return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f);  // as PyTorch: +0 for +-0 and NaN
    case ActFunc::kReciprocal:
      return static_cast<float>(1.0 / d);
    case ActFunc::kSqrt:
      return static_cast<float>(std::sqrt(d));
    default:
      throw std::logic_error("not exact");
  }
}

// Double-precision definitions of the transcendental functions.
double ref_act(ActFunc f, double x) {
  constexpr double kPi = 3.14159265358979323846;
  const auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const auto softplus = [](double v) {
    return v > 30 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
  };
  switch (f) {
    case ActFunc::kGelu:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ActFunc::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    case ActFunc::kSilu:
      return x * sigmoid(x);
    case ActFunc::kSigmoid:
      return sigmoid(x);
    case ActFunc::kTanh:
      return std::tanh(x);
    case ActFunc::kExp:
      return std::exp(x);
    case ActFunc::kLog:
      return std::log(x);
    case ActFunc::kRsqrt:
      return 1.0 / std::sqrt(x);
    case ActFunc::kSoftplus:
      return softplus(x);
    case ActFunc::kErf:
      return std::erf(x);
    case ActFunc::kSin:
      return std::sin(x);
    case ActFunc::kCos:
      return std::cos(x);
    case ActFunc::kMish:
      return x * std::tanh(softplus(x));
    case ActFunc::kGeluDx:
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * kPi);
    case ActFunc::kSiluDx: {
      const double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
    default:
      return ref_act_exact(f, static_cast<float>(x));
  }
}

// Tolerance for fp32 evaluation of a transcendental function at x: relative 1e-5, plus, where the
// fp32 formula cancels against 1 (1 + erf, 1 + tanh, 1 - sigmoid), an absolute 2^-22 * max(1,|x|),
// plus a floor of 1e-35: silu(-89) is 2e-37 but its fp32 exp(89) overflows and gives -0.
double act_tolerance(ActFunc f, double x, double ref) {
  double tol = 1e-5 * std::fabs(ref) + 1e-35;
  if (f == ActFunc::kGelu || f == ActFunc::kGeluTanh || f == ActFunc::kGeluDx ||
      f == ActFunc::kSiluDx) {
    tol += std::ldexp(1.0, -22) * std::max(1.0, std::fabs(x));
  }
  return tol;
}

// One unit in the last place of `t` at magnitude |v|.
double ulp_of(DType t, double v) {
  const int e = v == 0 ? -1000 : std::ilogb(v);
  switch (t) {
    case DType::kFp32:
      return std::ldexp(1.0, std::max(e, -126) - 23);
    case DType::kBf16:
      return std::ldexp(1.0, std::max(e, -126) - 7);
    case DType::kFp16:
      return std::ldexp(1.0, std::max(e, -14) - 10);
    case DType::kFp8E4M3:
      return std::ldexp(1.0, std::max(e, -6) - 3);
    case DType::kFp8E5M2:
      return std::ldexp(1.0, std::max(e, -14) - 2);
    default:
      return 1.0;
  }
}

// `got` (stored in `t`) against a double reference allowed `tol` in fp32 before the store.
std::string check_near(float got, double ref, double tol, DType t) {
  const float ref_f = static_cast<float>(ref);
  const float want = round_to(t, ref_f);
  std::ostringstream why;
  if (std::isnan(ref_f) || std::isnan(want)) {
    if (std::isnan(got)) return "";
    why << "want NaN got " << got;
    return why.str();
  }
  if (std::isinf(want) || std::isinf(got)) {
    if (got == want) return "";
    why << "want " << want << " got " << got << " (ref " << ref << ")";
    return why.str();
  }
  const double allowed =
      tol + (t == DType::kFp32 ? 0.0 : ulp_of(t, ref)) + (is_integer(t) ? 1.0 : 0.0);
  if (std::fabs(static_cast<double>(got) - ref) <= allowed) return "";
  why.precision(9);
  why << "want " << ref << " +- " << allowed << " got " << got;
  return why.str();
}

// Nearest-even rounding of an exact integer to a float type: keep the type's significant bits.
double round_int_to(DType t, int64_t v) {
  const int bits = t == DType::kFp32      ? 24
                   : t == DType::kBf16    ? 8
                   : t == DType::kFp16    ? 11
                   : t == DType::kFp8E4M3 ? 4
                                          : 3;
  const uint64_t a = static_cast<uint64_t>(v < 0 ? -v : v);
  uint64_t r = a;
  const int width = static_cast<int>(std::bit_width(a));
  if (width > bits) {
    const int shift = width - bits;
    uint64_t q = a >> shift;
    const uint64_t rem = a & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    r = q << shift;
  }
  return v < 0 ? -static_cast<double>(r) : static_cast<double>(r);
}

// An immediate takes part in exact integer math only if it is an int32 value.
bool imm_is_int32(float v) {
  return std::trunc(v) == v && v >= -2147483648.0f && v < 2147483648.0f;
}

// ------------------------------------------------------------------ random data

class Rand {
 public:
  explicit Rand(uint64_t seed) : g_(seed) {}
  int64_t range(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(g_);
  }
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(g_); }
  bool coin(double p = 0.5) { return unit() < p; }
  float normal(float sd) { return std::normal_distribution<float>(0.0f, sd)(g_); }
  template <typename T>
  T pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }
  // lo or hi now and then, else uniform.
  int64_t edgy(int64_t lo, int64_t hi) {
    const double r = unit();
    return r < 0.15 ? hi : (r < 0.25 ? lo : range(lo, hi));
  }
  std::mt19937_64& gen() { return g_; }

 private:
  std::mt19937_64 g_;
};

enum class Vals {
  kAny,     // everything: inf, NaN, -0, random codes, wide magnitudes
  kFinite,  // finite values in the dtype's range
  kTame,    // N(0, 1) and small integers
};

double dtype_max(DType t) {
  switch (t) {
    case DType::kBf16:
      return 3.38e38;
    case DType::kFp16:
      return 65504;
    case DType::kFp8E4M3:
      return 448;
    case DType::kFp8E5M2:
      return 57344;
    default:
      return 3.4e38;
  }
}

int64_t random_int(Rand& r, DType t) {
  int64_t lo = 0, hi = 0;
  switch (t) {
    case DType::kInt32:
      lo = INT32_MIN, hi = INT32_MAX;
      break;
    case DType::kInt16:
      lo = INT16_MIN, hi = INT16_MAX;
      break;
    case DType::kInt8:
      lo = INT8_MIN, hi = INT8_MAX;
      break;
    default:
      lo = 0, hi = 255;
      break;
  }
  const double u = r.unit();
  if (u < 0.5) return r.range(std::max<int64_t>(lo, -20), std::min<int64_t>(hi, 40));
  if (u < 0.9) return r.range(lo, hi);
  return r.pick(std::vector<int64_t>{lo, hi, lo + 1, hi - 1, 0, 1, lo < 0 ? -1 : 2});
}

void put_random(Rand& r, uint8_t* e, DType t, Vals v) {
  if (is_integer(t)) {
    store_int(e, t, random_int(r, t));
    return;
  }
  const double u = r.unit();
  if (v == Vals::kAny) {
    if (u < 0.05) {
      store_float(e, t, r.pick(std::vector<float>{kInf, -kInf, kNaN, -kNaN, 0.0f, -0.0f}));
      return;
    }
    if (u < 0.15) {  // any code: subnormals, NaN payloads, extremes
      const uint64_t bits = r.gen()();
      std::memcpy(e, &bits, dtype_size(t));
      return;
    }
  }
  if (u < 0.35) {
    store_float(e, t, static_cast<float>(r.range(-8, 8)));
    return;
  }
  float x = r.normal(v == Vals::kTame ? 1.0f : 3.0f);
  if (v != Vals::kTame && r.coin(0.15)) x = std::ldexp(x, static_cast<int>(r.range(-40, 40)));
  if (v == Vals::kFinite) {
    const float m = static_cast<float>(dtype_max(t));
    x = std::clamp(x, -m, m);
  }
  store_float(e, t, x);
}

struct Shape {
  uint32_t parts = 1;
  std::vector<uint32_t> dims;
  uint64_t free() const {
    return std::accumulate(dims.begin(), dims.end(), uint64_t{1}, std::multiplies<>());
  }
};

// ------------------------------------------------------------------ the fixture

struct Out {
  enum Mode {
    kBits,    // same bytes, or both NaN (float types)
    kRaw,     // same bytes, NaN payloads included
    kApprox,  // `approx` decides
  };
  using Approx = std::function<std::string(uint32_t p, uint64_t i, float got)>;
  Out(const AccessPattern& a, Mode m = kBits, Approx f = {})
      : ap(a), mode(m), approx(std::move(f)) {}
  AccessPattern ap;
  Mode mode;
  Approx approx;
};

std::string describe(const uint8_t* e, DType t) {
  std::ostringstream s;
  uint32_t raw = 0;
  std::memcpy(&raw, e, dtype_size(t));
  s.precision(9);
  if (is_float(t)) {
    s << load_float(e, t);
  } else {
    s << load_int(e, t);
  }
  s << " (0x" << std::hex << raw << ")";
  return s.str();
}

class ExecutorRef : public ::testing::Test {
 protected:
  void SetUp() override {
    // Garbage everywhere, so a stray write of any value shows up in the image compare.
    for (uint8_t* base : {sbuf_.partition(0), psum_.partition(0)}) {
      for (uint64_t k = 0; k < kParts * kPartBytes; ++k)
        base[k] = static_cast<uint8_t>(rnd_.gen()());
    }
    for (uint64_t k = 0; k < kHbmBytes; ++k) hbm_.data()[k] = static_cast<uint8_t>(rnd_.gen()());
  }

  View real() { return {sbuf_.partition(0), psum_.partition(0), hbm_.data()}; }

  // Copies the memories into `m` (buffers reused across cases: allocation dominated the runtime).
  void snapshot_into(Image& m) {
    m.sbuf.resize(kParts * kPartBytes);
    m.psum.resize(kParts * kPartBytes);
    m.hbm.resize(kHbmBytes);
    std::memcpy(m.sbuf.data(), sbuf_.partition(0), m.sbuf.size());
    std::memcpy(m.psum.data(), psum_.partition(0), m.psum.size());
    std::memcpy(m.hbm.data(), hbm_.data(), m.hbm.size());
  }
  Image& snapshot() {
    snapshot_into(want_);
    return want_;
  }

  void fill(const AccessPattern& ap, Vals v) {
    const View r = real();
    for (uint32_t p = 0; p < ap.partitions; ++p) {
      for (uint64_t i = 0; i < ap.free_elements(); ++i)
        put_random(rnd_, r.at(ap, p, i), ap.dtype, v);
    }
  }

  Shape random_shape(uint32_t max_parts, uint64_t max_free, int max_dims = 4) {
    Shape s;
    const double r = rnd_.unit();
    s.parts =
        r < 0.15 ? max_parts : (r < 0.3 ? 1 : static_cast<uint32_t>(rnd_.range(1, max_parts)));
    const int nd = static_cast<int>(rnd_.range(1, max_dims));
    uint64_t budget = static_cast<uint64_t>(rnd_.range(1, static_cast<int64_t>(max_free)));
    for (int k = 0; k < nd; ++k) {
      const double per = std::ceil(std::pow(static_cast<double>(budget), 1.0 / (nd - k)));
      const auto d = static_cast<uint32_t>(
          rnd_.range(1, std::max<int64_t>(1, static_cast<int64_t>(per * 1.5))));
      s.dims.push_back(std::min<uint32_t>(d, static_cast<uint32_t>(budget)));
      budget = std::max<uint64_t>(1, budget / s.dims.back());
    }
    std::shuffle(s.dims.begin(), s.dims.end(), rnd_.gen());
    return s;
  }

  // A random factorisation of n into 1..max_dims sizes.
  std::vector<uint32_t> split(uint32_t n, int max_dims = 4) {
    std::vector<uint32_t> d;
    const int nd = static_cast<int>(rnd_.range(1, max_dims));
    for (int k = 0; k + 1 < nd; ++k) {
      std::vector<uint32_t> divisors;
      for (uint32_t x = 1; x <= n; ++x) {
        if (n % x == 0) divisors.push_back(x);
      }
      d.push_back(rnd_.pick(divisors));
      n /= d.back();
    }
    d.push_back(n);
    std::shuffle(d.begin(), d.end(), rnd_.gen());
    return d;
  }

  // Lays out a shape inside operand slot `slot`: dims in a random physical order with padding,
  // some reversed (negative stride), and for sources some broadcast (stride 0); in HBM the
  // partition dimension takes part like a free dim.
  AccessPattern place(MemSpace space, DType t, const Shape& s, int slot,
                      bool broadcast_ok = false) {
    AccessPattern ap;
    ap.space = space;
    ap.dtype = t;
    ap.partitions = s.parts;
    ap.ndims = static_cast<uint8_t>(s.dims.size());
    const bool hbm = space == MemSpace::kHbm;
    const int nd = ap.ndims, n = nd + (hbm ? 1 : 0);
    std::vector<uint32_t> size(s.dims);
    if (hbm) size.push_back(s.parts);
    const int64_t es = static_cast<int64_t>(dtype_size(t));
    const int64_t slot_bytes = static_cast<int64_t>(hbm ? kHbmSlot : kSlotBytes);
    for (int attempt = 0; attempt < 30; ++attempt) {
      const bool strided = attempt < 20 && rnd_.coin(0.75);
      std::vector<int> order;  // physical order, innermost first
      for (int k = nd - 1; k >= 0; --k) order.push_back(k);
      if (hbm) order.push_back(nd);
      if (strided && rnd_.coin(0.3)) std::shuffle(order.begin(), order.end(), rnd_.gen());
      std::vector<int64_t> stride(n);
      int64_t run = 1;
      for (int j : order) {
        stride[j] = run;
        run = run * size[j] + (strided && rnd_.coin(0.4) ? rnd_.range(1, 3) : 0);
      }
      for (int j = 0; j < n; ++j) {
        if (size[j] <= 1) continue;
        if (strided && rnd_.coin(0.15)) stride[j] = -stride[j];
        if (broadcast_ok && rnd_.coin(0.12)) stride[j] = 0;
      }
      for (int k = 0; k < nd; ++k) ap.dims[k] = {stride[k], s.dims[k]};
      if (hbm) ap.partition_stride = stride[nd];
      ap.offset = 0;
      const AccessPattern::Span span = ap.byte_span();
      const int64_t width = span.hi - span.lo;
      if (width > slot_bytes) continue;
      const int64_t slack = (slot_bytes - width) / es;
      ap.offset = static_cast<uint64_t>(slot * slot_bytes - span.lo + es * rnd_.range(0, slack));
      if (!hbm) ap.start_partition = static_cast<uint32_t>(rnd_.range(0, kParts - s.parts));
      return ap;
    }
    throw std::logic_error("test shape does not fit a slot");
  }

  MemSpace on_chip() { return rnd_.coin(0.7) ? MemSpace::kSbuf : MemSpace::kPsum; }

  // Runs `in` on the real memories and compares everything with `want`. Returns false (after
  // reporting) on any difference.
  bool run(const Instruction& in, Image& want, const std::vector<Out>& outs,
           const std::string& label) {
    execute(in, mem_);
    Image& got = got_;
    snapshot_into(got);
    const View w = want.view(), g = got.view();
    std::ostringstream report;
    int bad = 0;
    for (const Out& o : outs) {
      const size_t es = dtype_size(o.ap.dtype);
      for (uint32_t p = 0; p < o.ap.partitions; ++p) {
        for (uint64_t i = 0; i < o.ap.free_elements(); ++i) {
          uint8_t* we = w.at(o.ap, p, i);
          const uint8_t* ge = g.at(o.ap, p, i);
          std::string why;
          if (o.mode == Out::kApprox) {
            why = o.approx(p, i, load_float(ge, o.ap.dtype));
          } else if (std::memcmp(we, ge, es) != 0) {
            const bool both_nan = o.mode == Out::kBits && is_float(o.ap.dtype) &&
                                  std::isnan(load_float(we, o.ap.dtype)) &&
                                  std::isnan(load_float(ge, o.ap.dtype));
            if (!both_nan) {
              why = "want " + describe(we, o.ap.dtype) + " got " + describe(ge, o.ap.dtype);
            }
          }
          std::memcpy(we, ge, es);  // checked; the image compare below looks for stray writes
          if (!why.empty() && bad++ < 5) {
            report << "\n  " << o.ap.to_string() << " [p " << p << ", i " << i << "]: " << why;
          }
        }
      }
    }
    const struct {
      const char* name;
      const std::vector<uint8_t>& a;
      const std::vector<uint8_t>& b;
    } regions[] = {
        {"sbuf", want.sbuf, got.sbuf}, {"psum", want.psum, got.psum}, {"hbm", want.hbm, got.hbm}};
    for (const auto& r : regions) {
      if (std::memcmp(r.a.data(), r.b.data(), r.a.size()) == 0) continue;
      const auto diff = std::mismatch(r.a.begin(), r.a.end(), r.b.begin());
      if (diff.first != r.a.end()) {
        const size_t at = static_cast<size_t>(diff.first - r.a.begin());
        report << "\n  stray write in " << r.name << " at byte " << at;
        if (r.name[0] != 'h')
          report << " (partition " << at / kPartBytes << ", offset " << at % kPartBytes << ")";
        ++bad;
      }
    }
    if (bad == 0) return true;
    ADD_FAILURE() << label << ": " << bad << " mismatches" << report.str();
    return false;
  }

  // Stops a test after a few failing cases: one bug is enough to see.
  bool enough_failures(bool ok) { return !ok && ++failed_cases_ >= 3; }

  OnChipMemory sbuf_{kParts, kPartBytes};
  OnChipMemory psum_{kParts, kPartBytes};
  HbmStorage hbm_{kHbmBytes, 1};
  MemoryMap mem_{&sbuf_, &psum_, &hbm_};
  Rand rnd_{20240611};
  Image want_, got_;
  int failed_cases_ = 0;
};

std::string label_of(const char* op, std::initializer_list<AccessPattern> aps,
                     const std::string& extra = "") {
  std::ostringstream s;
  s << op;
  for (const AccessPattern& ap : aps) s << " " << ap.to_string();
  if (!extra.empty()) s << " " << extra;
  return s.str();
}

// ------------------------------------------------------------------ matmul / transpose

TEST_F(ExecutorRef, MatmulSumsFp32ProductsInKOrder) {
  const std::vector<DType> narrow = {DType::kBf16, DType::kFp16, DType::kFp8E4M3, DType::kFp8E5M2};
  for (int c = 0; c < 30; ++c) {
    const auto K = static_cast<uint32_t>(rnd_.edgy(1, 128));
    const auto M = static_cast<uint32_t>(rnd_.edgy(1, 128));
    const auto N = static_cast<uint32_t>(rnd_.edgy(1, 512));
    const bool fp32 = rnd_.coin(0.3);
    const DType ts = fp32 ? DType::kFp32 : rnd_.pick(narrow);
    const DType tm = fp32 ? DType::kFp32 : rnd_.pick(narrow);
    const AccessPattern st = place(MemSpace::kSbuf, ts, {K, split(M, 3)}, 0);
    const AccessPattern mv = place(MemSpace::kSbuf, tm, {K, split(N, 3)}, 1);
    const AccessPattern dst =
        place(MemSpace::kPsum, DType::kFp32, {M, split(N, 3)}, int(rnd_.range(0, 3)));
    const Vals v = rnd_.coin(0.15) ? Vals::kAny : Vals::kTame;
    fill(st, v);
    fill(mv, v);
    const bool acc = rnd_.coin(0.5);
    if (acc) fill(dst, Vals::kTame);

    Image& want = snapshot();
    const View w = want.view();
    std::vector<float> a(size_t{K} * M), b(size_t{K} * N);
    for (uint32_t k = 0; k < K; ++k) {
      for (uint32_t m = 0; m < M; ++m) a[size_t{k} * M + m] = w.f(st, k, m);
      for (uint32_t n = 0; n < N; ++n) b[size_t{k} * N + n] = w.f(mv, k, n);
    }
    for (uint32_t m = 0; m < M; ++m) {
      for (uint32_t n = 0; n < N; ++n) {
        float s = 0.0f;
        for (uint32_t k = 0; k < K; ++k) {
          // The product rounded to fp32 (exact in double, rounded once), then an fp32 add.
          const float prod =
              static_cast<float>(double{a[size_t{k} * M + m]} * b[size_t{k} * N + n]);
          s = static_cast<float>(double{s} + prod);
        }
        if (acc) s = static_cast<float>(double{w.f(dst, m, n)} + s);
        w.set_f(dst, m, n, s);
      }
    }
    const auto in = isa::matmul(dst, st, mv, acc);
    if (enough_failures(
            run(in, want, {{dst}}, label_of("matmul", {dst, st, mv}, acc ? "acc" : ""))))
      return;
  }
}

TEST_F(ExecutorRef, TransposeMovesEveryValue) {
  for (int c = 0; c < 30; ++c) {
    const auto P = static_cast<uint32_t>(rnd_.edgy(1, 128));
    const auto F = static_cast<uint32_t>(rnd_.edgy(1, 128));
    const DType ts = rnd_.pick(kFloats);
    const DType td = rnd_.coin() ? DType::kFp32 : ts;
    const AccessPattern src = place(MemSpace::kSbuf, ts, {P, split(F, 3)}, 0);
    const AccessPattern dst = place(MemSpace::kPsum, td, {F, split(P, 3)}, int(rnd_.range(0, 3)));
    fill(src, Vals::kAny);
    Image& want = snapshot();
    const View w = want.view();
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t f = 0; f < F; ++f) {
        if (td == ts) {
          std::memcpy(w.at(dst, f, p), w.at(src, p, f), dtype_size(ts));
        } else {
          w.set_f(dst, f, p, w.f(src, p, f));  // widening to fp32 is exact
        }
      }
    }
    if (enough_failures(
            run(isa::transpose(dst, src), want, {{dst}}, label_of("transpose", {dst, src}))))
      return;
  }
}

// ------------------------------------------------------------------ activation

TEST_F(ExecutorRef, ActivationExactFunctions) {
  const ActFunc funcs[] = {ActFunc::kCopy, ActFunc::kRelu,       ActFunc::kSquare, ActFunc::kAbs,
                           ActFunc::kSign, ActFunc::kReciprocal, ActFunc::kSqrt};
  const std::vector<float> scales = {1.0f, -1.0f, 0.5f, 2.5f, -0.0f, 3.0e38f, 1e-30f};
  const std::vector<float> biases = {0.0f, -0.0f, 1.0f, -2.25f, kInf, 0.1f};
  for (ActFunc fn : funcs) {
    for (int c = 0; c < 10; ++c) {
      const Shape s = random_shape(128, 200);
      const AccessPattern src = place(on_chip(), rnd_.pick(kAll), s, 0, true);
      const AccessPattern dst = place(on_chip(), rnd_.pick(kAll), s, 1);
      fill(src, Vals::kAny);
      const Shape col{s.parts, {1}};
      const AccessPattern scale_ap = place(on_chip(), rnd_.pick(kAll), col, 2);
      fill(scale_ap, Vals::kFinite);
      const AccessPattern bias_ap = place(on_chip(), rnd_.pick(kAll), col, 2);
      fill(bias_ap, Vals::kAny);
      const ScalarOperand scale =
          rnd_.coin(0.4) ? isa::per_partition(scale_ap) : isa::imm(rnd_.pick(scales));
      const ScalarOperand bias =
          rnd_.coin(0.4) ? isa::per_partition(bias_ap) : isa::imm(rnd_.pick(biases));
      Instruction in = isa::activation(dst, src, fn, scale, bias);
      in.has_acc_dst = rnd_.coin(0.6);
      if (in.has_acc_dst) in.acc_dst = place(on_chip(), rnd_.pick(kAll), col, 3);

      Image& want = snapshot();
      const View w = want.view();
      for (uint32_t p = 0; p < s.parts; ++p) {
        const float sc = scale.from_ap ? w.f(scale_ap, p, 0) : scale.imm;
        const float bi = bias.from_ap ? w.f(bias_ap, p, 0) : bias.imm;
        float sum = 0.0f;
        for (uint64_t i = 0; i < s.free(); ++i) {
          const float x = scaled_plus_bias(w.f(src, p, i), sc, bi);
          const float y = ref_act_exact(fn, x);
          w.set_f(dst, p, i, y);
          sum = i == 0 ? y : static_cast<float>(double{sum} + y);
        }
        if (in.has_acc_dst) w.set_f(in.acc_dst, p, 0, sum);
      }
      std::vector<Out> outs = {{dst}};
      if (in.has_acc_dst) outs.push_back({in.acc_dst});
      const std::string label = label_of("activation", {dst, src}, std::string(act_func_name(fn)));
      if (enough_failures(run(in, want, outs, label))) return;
    }
  }
}

TEST_F(ExecutorRef, ActivationTranscendentalFunctionsWithinTolerance) {
  const ActFunc funcs[] = {
      ActFunc::kGelu, ActFunc::kGeluTanh, ActFunc::kSilu,  ActFunc::kSigmoid,  ActFunc::kTanh,
      ActFunc::kExp,  ActFunc::kLog,      ActFunc::kRsqrt, ActFunc::kSoftplus, ActFunc::kErf,
      ActFunc::kSin,  ActFunc::kCos,      ActFunc::kMish,  ActFunc::kGeluDx,   ActFunc::kSiluDx};
  for (ActFunc fn : funcs) {
    const bool positive = fn == ActFunc::kLog || fn == ActFunc::kRsqrt;
    for (int c = 0; c < 6; ++c) {
      const Shape s = random_shape(128, 160);
      const DType ts = rnd_.pick(std::vector<DType>{DType::kFp32, DType::kBf16, DType::kFp16});
      const DType td = rnd_.coin(0.7) ? DType::kFp32 : DType::kBf16;
      const AccessPattern src = place(on_chip(), ts, s, 0, true);
      const AccessPattern dst = place(on_chip(), td, s, 1);
      {  // mostly N(0, 2.5); some saturating magnitudes, zeros and tiny values
        const View r = real();
        for (uint32_t p = 0; p < s.parts; ++p) {
          for (uint64_t i = 0; i < s.free(); ++i) {
            const double u = rnd_.unit();
            float x = u < 0.85   ? rnd_.normal(2.5f)
                      : u < 0.93 ? static_cast<float>(rnd_.range(10, 40) * (rnd_.coin() ? 1 : -1))
                                 : rnd_.pick(std::vector<float>{0.0f, -0.0f, 1e-20f, 1e-40f});
            if (positive) x = std::fabs(x);
            r.set_f(src, p, i, x);
          }
        }
      }
      const Shape col{s.parts, {1}};
      const AccessPattern scale_ap = place(on_chip(), DType::kFp32, col, 2);
      const AccessPattern bias_ap = place(on_chip(), DType::kBf16, col, 2);
      for (uint32_t p = 0; p < s.parts; ++p) {
        real().set_f(scale_ap, p, 0, static_cast<float>(rnd_.range(1, 8)) / 4);
        real().set_f(bias_ap, p, 0, positive ? std::fabs(rnd_.normal(1.0f)) : rnd_.normal(1.0f));
      }
      const ScalarOperand scale =
          rnd_.coin() ? isa::per_partition(scale_ap) : isa::imm(rnd_.coin() ? 1.0f : 0.75f);
      const ScalarOperand bias =
          rnd_.coin() ? isa::per_partition(bias_ap) : isa::imm(rnd_.coin() ? 0.0f : 0.5f);
      Instruction in = isa::activation(dst, src, fn, scale, bias);
      in.has_acc_dst = rnd_.coin(0.6);
      if (in.has_acc_dst) in.acc_dst = place(on_chip(), DType::kFp32, col, 3);

      Image& want = snapshot();
      const View w = want.view();
      std::vector<double> xs(size_t{s.parts} * s.free()), refs(xs.size());
      std::vector<double> sums(s.parts), sum_tol(s.parts);
      for (uint32_t p = 0; p < s.parts; ++p) {
        const float sc = scale.from_ap ? w.f(scale_ap, p, 0) : scale.imm;
        const float bi = bias.from_ap ? w.f(bias_ap, p, 0) : bias.imm;
        double sum = 0, mag = 0, atol = 0;
        for (uint64_t i = 0; i < s.free(); ++i) {
          const float x = scaled_plus_bias(w.f(src, p, i), sc, bi);
          const double ref = ref_act(fn, x);
          xs[p * s.free() + i] = x;
          refs[p * s.free() + i] = ref;
          sum += ref;
          mag += std::fabs(ref);
          atol += act_tolerance(fn, x, 0);
        }
        sums[p] = sum;
        // Each fp32 result within its tolerance, then n fp32 additions.
        sum_tol[p] = atol + mag * (1e-5 + std::ldexp(1.0, -24) * double(s.free()));
      }
      std::vector<Out> outs;
      outs.push_back({dst, Out::kApprox, [&, td](uint32_t p, uint64_t i, float got) {
                        const size_t k = p * s.free() + i;
                        return check_near(got, refs[k], act_tolerance(fn, xs[k], refs[k]), td);
                      }});
      if (in.has_acc_dst) {
        outs.push_back({in.acc_dst, Out::kApprox, [&](uint32_t p, uint64_t, float got) {
                          return check_near(got, sums[p], sum_tol[p], DType::kFp32);
                        }});
      }
      const std::string label = label_of("activation", {dst, src}, std::string(act_func_name(fn)));
      if (enough_failures(run(in, want, outs, label))) return;
    }
  }
}

// ------------------------------------------------------------------ tensor_tensor / tensor_scalar

TEST_F(ExecutorRef, TensorTensorEveryAluOp) {
  for (int opi = 0; opi <= static_cast<int>(AluOp::kShiftRight); ++opi) {
    const auto op = static_cast<AluOp>(opi);
    for (int c = 0; c < 8; ++c) {
      const Shape s = random_shape(128, 128);
      DType t0 = rnd_.pick(kAll), t1 = rnd_.pick(kAll), td = rnd_.pick(kAll);
      if (is_bitwise(op)) {  // integer operands; on the float path (float dst) they pass through
        t0 = rnd_.pick(kInts), t1 = rnd_.pick(kInts);  // fp32, so keep them below 2^24
        if (is_float(td))
          t0 = t1 = rnd_.pick(std::vector<DType>{DType::kInt16, DType::kInt8, DType::kUint8});
      }
      const bool int_path = is_integer(t0) && is_integer(t1) && is_integer(td);
      if (op == AluOp::kPow && !int_path) td = rnd_.pick(kFloats);  // compared within 1 ulp
      const MemSpace s0 = on_chip();
      const AccessPattern a = place(s0, t0, s, 0, true);
      const AccessPattern b =
          place(s0 == MemSpace::kPsum ? MemSpace::kSbuf : on_chip(), t1, s, 1, true);
      const AccessPattern dst = place(on_chip(), td, s, 2);
      fill(a, Vals::kAny);
      fill(b, Vals::kAny);
      Image& want = snapshot();
      const View w = want.view();
      std::vector<double> pow_ref;
      for (uint32_t p = 0; p < s.parts; ++p) {
        for (uint64_t i = 0; i < s.free(); ++i) {
          if (int_path) {
            w.set_n(dst, p, i, ref_alu_int(op, w.n(a, p, i), w.n(b, p, i)));
          } else if (op == AluOp::kPow) {
            pow_ref.push_back(std::pow(double{w.f(a, p, i)}, double{w.f(b, p, i)}));
          } else {
            w.set_f(dst, p, i, ref_alu_float(op, w.f(a, p, i), w.f(b, p, i)));
          }
        }
      }
      Out out{dst};
      if (!pow_ref.empty()) {
        out.mode = Out::kApprox;
        out.approx = [&, td](uint32_t p, uint64_t i, float got) {
          const double ref = pow_ref[p * s.free() + i];
          return check_near(got, ref, std::ldexp(std::fabs(ref), -23) + 1e-45, td);
        };
      }
      const auto in = isa::tensor_tensor(dst, a, b, op);
      if (enough_failures(
              run(in, want, {out},
                  label_of("tensor_tensor", {dst, a, b}, std::string(alu_op_name(op))))))
        return;
    }
  }
}

TEST_F(ExecutorRef, TensorScalarTwoOpsReverseAndPerPartitionOperands) {
  const std::vector<float> imms = {0.0f,           -0.0f,         1.0f,    -1.0f, 2.0f,  3.0f,
                                   7.0f,           31.0f,         33.0f,   0.5f,  -2.5f, 1e-3f,
                                   100.0f,         -128.0f,       kInf,    -kInf, kNaN,  3e9f,
                                   -2147483648.0f, 2147483648.0f, 65536.0f};
  const std::vector<float> small_ints = {0.0f, 1.0f, 2.0f, 3.0f, 5.0f, 31.0f, -1.0f, -7.0f, 255.0f};
  const int nops = static_cast<int>(AluOp::kShiftRight) + 1;
  for (int c = 0; c < 260; ++c) {
    AluOp op0 = static_cast<AluOp>(c % nops);
    AluOp op1 = rnd_.coin(0.4) ? AluOp::kBypass : static_cast<AluOp>(rnd_.range(0, nops - 1));
    const Shape s = random_shape(128, 96);
    DType ts = rnd_.pick(kAll), td = rnd_.pick(kAll);
    if (is_bitwise(op0) || is_bitwise(op1)) ts = rnd_.pick(kInts);
    // A bitwise op1 on the float path acts on int64(x): keep op0's result an int32 value.
    if (is_bitwise(op1) && !is_bitwise(op0)) op0 = AluOp::kBypass;
    const Shape col{s.parts, {1}};
    ScalarOperand so[2];
    const AluOp ops[2] = {op0, op1};
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && op1 == AluOp::kBypass) break;  // unused: the default immediate 0
      if (rnd_.coin(0.4)) {
        const DType tc = is_bitwise(ops[k]) ? rnd_.pick(kInts) : rnd_.pick(kAll);
        const AccessPattern ap = place(on_chip(), tc, col, 2 + k);
        fill(ap, is_bitwise(ops[k]) ? Vals::kAny : Vals::kFinite);
        so[k] = isa::per_partition(ap);
      } else {
        so[k] = isa::imm(is_bitwise(ops[k]) || ops[k] == AluOp::kPow ? rnd_.pick(small_ints)
                                                                     : rnd_.pick(imms));
      }
    }
    const auto operand_int = [](const ScalarOperand& o) {
      return o.from_ap ? is_integer(o.ap.dtype) : imm_is_int32(o.imm);
    };
    const bool int_path =
        is_integer(ts) && is_integer(td) && operand_int(so[0]) && operand_int(so[1]);
    if (!int_path && (op0 == AluOp::kPow || op1 == AluOp::kPow)) continue;  // pow: see TensorTensor
    if (!int_path && (is_bitwise(op0) || is_bitwise(op1)) && (ts == DType::kInt32)) continue;
    const AccessPattern src = place(on_chip(), ts, s, 0, true);
    const AccessPattern dst = place(on_chip(), td, s, 1);
    fill(src, Vals::kAny);
    Instruction in = isa::tensor_scalar(dst, src, op0, so[0], op1, so[1]);
    in.reverse0 = rnd_.coin();
    in.reverse1 = rnd_.coin();

    Image& want = snapshot();
    const View w = want.view();
    for (uint32_t p = 0; p < s.parts; ++p) {
      for (uint64_t i = 0; i < s.free(); ++i) {
        if (int_path) {
          int64_t x = w.n(src, p, i);
          for (int k = 0; k < 2; ++k) {
            if (k == 1 && op1 == AluOp::kBypass) break;
            const int64_t v = so[k].from_ap ? w.n(so[k].ap, p, 0) : static_cast<int64_t>(so[k].imm);
            const bool rev = k == 0 ? in.reverse0 : in.reverse1;
            x = rev ? ref_alu_int(ops[k], v, x) : ref_alu_int(ops[k], x, v);
          }
          w.set_n(dst, p, i, x);
        } else {
          float x = w.f(src, p, i);
          for (int k = 0; k < 2; ++k) {
            if (k == 1 && op1 == AluOp::kBypass) break;
            const float v = so[k].from_ap ? w.f(so[k].ap, p, 0) : so[k].imm;
            const bool rev = k == 0 ? in.reverse0 : in.reverse1;
            x = rev ? ref_alu_float(ops[k], v, x) : ref_alu_float(ops[k], x, v);
          }
          w.set_f(dst, p, i, x);
        }
      }
    }
    std::ostringstream extra;
    extra << alu_op_name(op0) << (in.reverse0 ? "(rev)" : "") << " "
          << (so[0].from_ap ? so[0].ap.to_string() : std::to_string(so[0].imm)) << ", "
          << alu_op_name(op1) << (in.reverse1 ? "(rev)" : "") << " "
          << (so[1].from_ap ? so[1].ap.to_string() : std::to_string(so[1].imm))
          << (int_path ? " int" : " float");
    if (enough_failures(run(in, want, {{dst}}, label_of("tensor_scalar", {dst, src}, extra.str()))))
      return;
  }
}

// ------------------------------------------------------------------ tensor_reduce

TEST_F(ExecutorRef, TensorReduceEveryOpAndAxisCount) {
  const ReduceOp rops[] = {ReduceOp::kAdd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kMultiply};
  for (ReduceOp rop : rops) {
    for (int c = 0; c < 20; ++c) {
      const Shape s = random_shape(128, 200);
      const int nd = static_cast<int>(s.dims.size());
      const int axes = static_cast<int>(rnd_.range(1, nd));
      uint64_t inner = 1;
      for (int k = nd - axes; k < nd; ++k) inner *= s.dims[k];
      const uint32_t outer = static_cast<uint32_t>(s.free() / inner);
      const DType ts = rnd_.pick(kAll), td = rnd_.pick(kAll);
      const AccessPattern src = place(on_chip(), ts, s, 0, true);
      const AccessPattern dst = place(on_chip(), td, {s.parts, split(outer, 3)}, 1);
      fill(src, rnd_.coin(0.7) ? Vals::kAny : Vals::kTame);
      const bool int_path = is_integer(ts) && is_integer(td);
      Image& want = snapshot();
      const View w = want.view();
      for (uint32_t p = 0; p < s.parts; ++p) {
        for (uint64_t o = 0; o < outer; ++o) {
          if (int_path) {
            int64_t acc = w.n(src, p, o * inner);
            for (uint64_t j = 1; j < inner; ++j) {
              const int64_t x = w.n(src, p, o * inner + j);
              switch (rop) {
                case ReduceOp::kAdd:
                  acc = ref_alu_int(AluOp::kAdd, acc, x);
                  break;
                case ReduceOp::kMax:
                  acc = std::max(acc, x);
                  break;
                case ReduceOp::kMin:
                  acc = std::min(acc, x);
                  break;
                case ReduceOp::kMultiply:
                  acc = ref_alu_int(AluOp::kMultiply, acc, x);
                  break;
              }
            }
            w.set_n(dst, p, o, acc);
          } else {
            float acc = w.f(src, p, o * inner);  // sequential fp32 from the first element
            for (uint64_t j = 1; j < inner; ++j) {
              const float x = w.f(src, p, o * inner + j);
              switch (rop) {
                case ReduceOp::kAdd:
                  acc = ref_alu_float(AluOp::kAdd, acc, x);
                  break;
                case ReduceOp::kMax:
                  acc = ref_alu_float(AluOp::kMax, acc, x);
                  break;
                case ReduceOp::kMin:
                  acc = ref_alu_float(AluOp::kMin, acc, x);
                  break;
                case ReduceOp::kMultiply:
                  acc = ref_alu_float(AluOp::kMultiply, acc, x);
                  break;
              }
            }
            w.set_f(dst, p, o, acc);
          }
        }
      }
      const auto in = isa::tensor_reduce(dst, src, rop, static_cast<uint8_t>(axes));
      const std::string extra = std::string(reduce_op_name(rop)) + " axes " + std::to_string(axes);
      if (enough_failures(run(in, want, {{dst}}, label_of("tensor_reduce", {dst, src}, extra))))
        return;
    }
  }
}

// ------------------------------------------------------------------ copies and fills

TEST_F(ExecutorRef, TensorCopyEveryDtypePair) {
  for (DType ts : kAll) {
    for (DType td : kAll) {
      for (int c = 0; c < 2; ++c) {
        const Shape s = random_shape(128, 64);
        const AccessPattern src = place(on_chip(), ts, s, 0, true);
        const AccessPattern dst =
            place(on_chip(), td, {s.parts, split(static_cast<uint32_t>(s.free()))}, 1);
        fill(src, Vals::kAny);
        Image& want = snapshot();
        const View w = want.view();
        for (uint32_t p = 0; p < s.parts; ++p) {
          for (uint64_t i = 0; i < s.free(); ++i) {
            if (ts == td) {
              std::memcpy(w.at(dst, p, i), w.at(src, p, i), dtype_size(ts));  // raw
            } else if (is_integer(ts) && is_integer(td)) {
              w.set_n(dst, p, i, w.n(src, p, i));  // exact integer, wraps when narrowing
            } else {
              w.set_f(dst, p, i, w.f(src, p, i));  // through fp32
            }
          }
        }
        const Out out{dst, ts == td ? Out::kRaw : Out::kBits};
        if (enough_failures(
                run(isa::tensor_copy(dst, src), want, {out}, label_of("tensor_copy", {dst, src}))))
          return;
      }
    }
  }
}

TEST_F(ExecutorRef, IotaWrapsInInt32AndRoundsOnceToFloatTypes) {
  for (int c = 0; c < 40; ++c) {
    const Shape s = random_shape(128, 200);
    const DType td = rnd_.pick(kAll);
    const AccessPattern dst = place(on_chip(), td, s, int(rnd_.range(0, 3)));
    const auto val = [&](bool wide) {
      return static_cast<int32_t>(wide ? rnd_.range(INT32_MIN, INT32_MAX) : rnd_.range(-50, 50));
    };
    const bool wide = rnd_.coin(0.4);
    const int32_t base = val(wide), cm = val(wide && rnd_.coin());
    int32_t steps[kMaxFreeDims] = {};
    for (size_t k = 0; k < s.dims.size(); ++k) steps[k] = val(wide && rnd_.coin());
    Instruction in = isa::iota(dst, base, cm, {});
    for (int k = 0; k < kMaxFreeDims; ++k) in.iota_steps[k] = steps[k];
    Image& want = snapshot();
    const View w = want.view();
    for (uint32_t p = 0; p < s.parts; ++p) {
      for (uint64_t i = 0; i < s.free(); ++i) {
        int64_t v = int64_t{base} + int64_t{p} * cm;
        uint64_t rest = i;
        for (int k = static_cast<int>(s.dims.size()) - 1; k >= 0; --k) {
          v += static_cast<int64_t>(rest % s.dims[k]) * steps[k];
          rest /= s.dims[k];
        }
        const int32_t v32 = static_cast<int32_t>(static_cast<uint32_t>(v));
        if (is_integer(td)) {
          w.set_n(dst, p, i, v32);
        } else {
          w.set_f(dst, p, i, static_cast<float>(round_int_to(td, v32)));
        }
      }
    }
    std::ostringstream extra;
    extra << "base " << base << " cm " << cm << " steps " << steps[0] << "," << steps[1] << ","
          << steps[2] << "," << steps[3];
    if (enough_failures(run(in, want, {{dst}}, label_of("iota", {dst}, extra.str())))) return;
  }
}

TEST_F(ExecutorRef, MemsetStoresTheImmediateInTheDtype) {
  const std::vector<float> imms = {0.0f,   -0.0f,  1.5f,   -2.5f, 255.9f, 300.0f,   -129.7f,
                                   1e10f,  -1e10f, kInf,   -kInf, kNaN,   65519.0f, 65520.0f,
                                   464.0f, 500.0f, 1e-40f, 0.1f,  -7.0f,  3.0e38f};
  for (int c = 0; c < 40; ++c) {
    const Shape s = random_shape(128, 200);
    const DType td = rnd_.pick(kAll);
    const AccessPattern dst = place(on_chip(), td, s, int(rnd_.range(0, 3)));
    const float v = rnd_.coin(0.8) ? rnd_.pick(imms) : rnd_.normal(100.0f);
    Image& want = snapshot();
    const View w = want.view();
    for (uint32_t p = 0; p < s.parts; ++p) {
      for (uint64_t i = 0; i < s.free(); ++i) w.set_f(dst, p, i, v);
    }
    if (enough_failures(
            run(isa::memset(dst, v), want, {{dst}}, label_of("memset", {dst}, std::to_string(v)))))
      return;
  }
}

TEST_F(ExecutorRef, SelectWithTensorAndImmediateOnFalse) {
  const std::vector<float> imms = {0.0f,   -0.0f, 1.0f, -3.0f,         2.5f,           300.0f,
                                   -1e10f, kInf,  kNaN, 2147483648.0f, -2147483648.0f, 1e-3f};
  for (int c = 0; c < 60; ++c) {
    const Shape s = random_shape(128, 128);
    const DType tp = rnd_.pick(kAll), tt = rnd_.pick(kAll), td = rnd_.pick(kAll);
    const bool tensor_false = rnd_.coin();
    const DType tf = rnd_.pick(kAll);
    const AccessPattern pred = place(on_chip(), tp, s, 0, true);
    const AccessPattern on_true = place(on_chip(), tt, s, 1, true);
    const AccessPattern on_false = place(on_chip(), tf, s, 2, true);
    const AccessPattern dst = place(on_chip(), td, s, 3);
    {  // predicates: about half zero (+0 and -0), the rest nonzero or NaN
      const View r = real();
      for (uint32_t p = 0; p < s.parts; ++p) {
        for (uint64_t i = 0; i < s.free(); ++i) {
          if (rnd_.coin()) {
            r.set_f(pred, p, i, rnd_.coin() ? 0.0f : -0.0f);
          } else {
            put_random(rnd_, r.at(pred, p, i), tp, Vals::kAny);
          }
        }
      }
    }
    fill(on_true, Vals::kAny);
    fill(on_false, Vals::kAny);
    const float imm = rnd_.pick(imms);
    const Instruction in = tensor_false ? isa::select(dst, pred, on_true, on_false)
                                        : isa::select(dst, pred, on_true, imm);
    const bool int_path =
        is_integer(td) && is_integer(tt) && (tensor_false ? is_integer(tf) : imm_is_int32(imm));
    Image& want = snapshot();
    const View w = want.view();
    for (uint32_t p = 0; p < s.parts; ++p) {
      for (uint64_t i = 0; i < s.free(); ++i) {
        const bool take = w.f(pred, p, i) != 0.0f;  // NaN is nonzero
        if (int_path) {
          w.set_n(dst, p, i,
                  take ? w.n(on_true, p, i)
                       : (tensor_false ? w.n(on_false, p, i) : static_cast<int64_t>(imm)));
        } else {
          w.set_f(dst, p, i,
                  take ? w.f(on_true, p, i) : (tensor_false ? w.f(on_false, p, i) : imm));
        }
      }
    }
    const std::string extra = tensor_false ? "" : "imm " + std::to_string(imm);
    if (enough_failures(run(in, want, {{dst}}, label_of("select", {dst, pred, on_true}, extra))))
      return;
  }
}

// ------------------------------------------------------------------ DMA

TEST_F(ExecutorRef, DmaCopyReshapesCastsAndBroadcasts) {
  for (int c = 0; c < 80; ++c) {
    const MemSpace ss = rnd_.coin(0.6) ? MemSpace::kHbm : MemSpace::kSbuf;
    const MemSpace ds = rnd_.coin(0.6) ? MemSpace::kHbm : MemSpace::kSbuf;
    const DType ts = rnd_.pick(kAll);
    const DType td = rnd_.coin(0.5) ? ts : rnd_.pick(kAll);
    const Shape s = random_shape(128, 200);
    Shape d = s;
    if (rnd_.coin(0.6)) {  // a different [partitions, free] split of the same elements
      const uint64_t total = s.parts * s.free();
      std::vector<uint32_t> parts;  // splits whose rows fit an SBUF slot with room to pad
      for (uint32_t q = 1; q <= 128; ++q) {
        if (total % q == 0 &&
            (ds == MemSpace::kHbm || total / q * dtype_size(td) <= kSlotBytes / 2)) {
          parts.push_back(q);
        }
      }
      if (!parts.empty()) {
        d.parts = rnd_.pick(parts);
        d.dims = split(static_cast<uint32_t>(total / d.parts));
      }
    }
    AccessPattern src;
    const bool row_broadcast = ss == MemSpace::kHbm && rnd_.coin(0.2);
    if (row_broadcast) {  // one HBM row to every partition (partition_stride 0)
      Shape row = s;
      row.parts = 1;
      src = place(MemSpace::kHbm, ts, row, 0, false);
      src.partitions = s.parts;
      src.partition_stride = 0;
    } else {
      src = place(ss, ts, s, 0, true);
    }
    const AccessPattern dst = place(ds, td, d, 1);
    fill(src, Vals::kAny);
    Image& want = snapshot();
    const View w = want.view();
    for (uint64_t k = 0; k < s.parts * s.free(); ++k) {  // row-major order over both patterns
      const uint32_t sp = static_cast<uint32_t>(k / s.free()),
                     dp = static_cast<uint32_t>(k / d.free());
      const uint64_t si = k % s.free(), di = k % d.free();
      if (ts == td) {
        std::memcpy(w.at(dst, dp, di), w.at(src, sp, si), dtype_size(ts));
      } else {
        w.set_f(dst, dp, di, w.f(src, sp, si));  // DMA casts go through fp32
      }
    }
    const Out out{dst, ts == td ? Out::kRaw : Out::kBits};
    if (enough_failures(
            run(isa::dma_copy(dst, src), want, {out}, label_of("dma_copy", {dst, src}))))
      return;
  }
}

// The one place where "from the first element" and "from +0" differ is the sign of a sum of
// -0s: acc_dst and tensor_reduce start from the first element, matmul from a zeroed accumulator.
TEST_F(ExecutorRef, SumsStartFromFirstElementMatmulFromZero) {
  const AccessPattern src = isa::sbuf_tile(DType::kFp32, 4, 0, 3);
  const AccessPattern dst = isa::sbuf_tile(DType::kFp32, 4, 2048, 3);
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, 4, 4096, 1);
  const AccessPattern red = isa::sbuf_tile(DType::kFp32, 4, 6144, 1);
  const AccessPattern ones = isa::sbuf_tile(DType::kFp32, 4, 6400, 2);
  const AccessPattern mm = isa::psum_tile(DType::kFp32, 3, 0, 2);
  const View r = real();
  for (uint32_t p = 0; p < 4; ++p) {
    for (uint64_t i = 0; i < 3; ++i) r.set_f(src, p, i, -0.0f);
    for (uint64_t i = 0; i < 2; ++i) r.set_f(ones, p, i, 1.0f);
  }
  Instruction act = isa::activation(dst, src, ActFunc::kCopy, isa::imm(1.0f), isa::imm(-0.0f));
  act.acc_dst = acc;
  act.has_acc_dst = true;
  execute(act, mem_);
  execute(isa::tensor_reduce(red, src, ReduceOp::kAdd), mem_);
  execute(isa::matmul(mm, src, ones, false), mem_);  // K = 4 products of -0 * 1
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(std::bit_cast<uint32_t>(r.f(acc, p, 0)), 0x80000000u) << p;
    EXPECT_EQ(std::bit_cast<uint32_t>(r.f(red, p, 0)), 0x80000000u) << p;
  }
  for (uint32_t m = 0; m < 3; ++m) {
    for (uint64_t n = 0; n < 2; ++n) EXPECT_EQ(std::bit_cast<uint32_t>(r.f(mm, m, n)), 0u);
  }
}

// ------------------------------------------------------------------ scalar helpers

TEST(ExecutorScalar, IntegerAluMatchesReference) {
  Rand r(7);
  const std::vector<int64_t> edges = {INT32_MIN, INT32_MIN + 1, INT32_MAX, -1, 0, 1, 2, 31, 32,
                                      33,        -32,           65536};
  for (int opi = 0; opi <= static_cast<int>(AluOp::kShiftRight); ++opi) {
    const auto op = static_cast<AluOp>(opi);
    int bad = 0;
    for (int k = 0; k < 20000; ++k) {
      const auto pick = [&] {
        const double u = r.unit();
        return u < 0.3 ? r.pick(edges)
                       : (u < 0.6 ? r.range(-40, 40) : r.range(INT32_MIN, INT32_MAX));
      };
      const int64_t a = pick(), b = pick();
      const int64_t got = apply_alu_int(op, a, b), want = ref_alu_int(op, a, b);
      if (got != want && bad++ < 3) {
        ADD_FAILURE() << alu_op_name(op) << "(" << a << ", " << b << ") = " << got << ", want "
                      << want;
      }
    }
  }
}

TEST(ExecutorScalar, FloatAluMatchesReference) {
  Rand r(8);
  const std::vector<float> edges = {0.0f,  -0.0f, 1.0f,   -1.0f,   0.5f,     2.0f,       kInf,
                                    -kInf, kNaN,  1e-45f, 3.4e38f, -3.4e38f, 16777217.0f};
  for (int opi = 0; opi <= static_cast<int>(AluOp::kShiftRight); ++opi) {
    const auto op = static_cast<AluOp>(opi);
    int bad = 0;
    for (int k = 0; k < 20000; ++k) {
      const auto pick = [&] {
        if (is_bitwise(op)) return static_cast<float>(r.range(-100000, 100000));
        const double u = r.unit();
        return u < 0.2   ? r.pick(edges)
               : u < 0.4 ? static_cast<float>(r.range(-8, 8))
                         : std::ldexp(r.normal(1.0f), static_cast<int>(r.range(-20, 20)));
      };
      const float a = pick(), b = pick();
      const float got = apply_alu_float(op, a, b), want = ref_alu_float(op, a, b);
      bool ok = std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want) ||
                (std::isnan(got) && std::isnan(want));
      if (!ok && op == AluOp::kPow) {
        ok = check_near(got, std::pow(double{a}, double{b}),
                        std::ldexp(std::fabs(double{want}), -23) + 1e-45, DType::kFp32)
                 .empty();
      }
      if (!ok && bad++ < 3) {
        ADD_FAILURE() << alu_op_name(op) << "(" << a << ", " << b << ") = " << got << ", want "
                      << want;
      }
    }
  }
}

TEST(ExecutorScalar, ActivationFunctionsMatchDoubleReference) {
  Rand r(9);
  for (int fi = 0; fi <= static_cast<int>(ActFunc::kSiluDx); ++fi) {
    const auto f = static_cast<ActFunc>(fi);
    int bad = 0;
    for (int k = 0; k < 20000; ++k) {
      const double u = r.unit();
      float x = u < 0.7   ? r.normal(3.0f)
                : u < 0.9 ? std::ldexp(r.normal(1.0f), static_cast<int>(r.range(-30, 7)))
                          : static_cast<float>(r.range(-90, 90));
      if (f == ActFunc::kLog || f == ActFunc::kRsqrt || f == ActFunc::kSqrt) x = std::fabs(x);
      const float got = apply_activation(f, x);
      std::string why;
      if (act_is_exact(f)) {
        const float want = ref_act_exact(f, x);
        if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) &&
            !(std::isnan(got) && std::isnan(want))) {
          why = "want " + std::to_string(want);
        }
      } else {
        const double ref = ref_act(f, x);
        why = check_near(got, ref, act_tolerance(f, x, ref), DType::kFp32);
      }
      if (!why.empty() && bad++ < 3) {
        ADD_FAILURE() << act_func_name(f) << "(" << x << ") = " << got << ": " << why;
      }
    }
  }
  // Edge values whose results are fixed by definition.
  EXPECT_EQ(std::bit_cast<uint32_t>(apply_activation(ActFunc::kRelu, -0.0f)), 0u);
  EXPECT_TRUE(std::isnan(apply_activation(ActFunc::kRelu, kNaN)));
  EXPECT_EQ(std::bit_cast<uint32_t>(apply_activation(ActFunc::kSign, -0.0f)), 0u);  // as PyTorch
  EXPECT_EQ(apply_activation(ActFunc::kSign, kNaN), 0.0f);
  EXPECT_EQ(apply_activation(ActFunc::kSign, -1e-40f), -1.0f);
  EXPECT_EQ(apply_activation(ActFunc::kExp, -kInf), 0.0f);
  EXPECT_EQ(apply_activation(ActFunc::kLog, 0.0f), -kInf);
  EXPECT_EQ(apply_activation(ActFunc::kRsqrt, 0.0f), kInf);
  EXPECT_EQ(apply_activation(ActFunc::kSigmoid, 200.0f), 1.0f);
  EXPECT_EQ(apply_activation(ActFunc::kSoftplus, 100.0f), 100.0f);
  EXPECT_EQ(apply_activation(ActFunc::kTanh, kInf), 1.0f);
}

// ------------------------------------------------------------------ through a Device

// A multi-engine program (DMA in, matmul with accumulate, activation with bias and acc_dst,
// iota, tensor_scalar, select, reduce, DMA out) run on a Device in full mode must leave HBM
// exactly as executing the same instructions directly, in dependency order, does.
TEST(ExecutorDevice, FullModeProgramMatchesDirectExecution) {
  auto dev = testing::make_device("trn1", {}, ExecMode::kFull, 1);
  const CoreParams& core = dev->params().core;
  ASSERT_EQ(dev->hbm_base_of_core(0), 0u);
  constexpr uint32_t K = 96, M = 64, N = 200;
  constexpr uint64_t kWindow = 1 << 20;
  const uint64_t a_hbm = 0, b_hbm = 64 << 10, bias_hbm = 128 << 10;
  const uint64_t z_hbm = 256 << 10, sel_hbm = 384 << 10, red_hbm = 512 << 10, acc_hbm = 520 << 10;
  Rand r(11);
  for (uint64_t i = 0; i < uint64_t{K} * M; ++i)
    store_float(dev->hbm_data() + a_hbm + 2 * i, DType::kBf16, r.normal(1.0f));
  for (uint64_t i = 0; i < uint64_t{K} * N; ++i)
    store_float(dev->hbm_data() + b_hbm + 2 * i, DType::kBf16, r.normal(0.3f));
  for (uint64_t i = 0; i < M; ++i)
    store_float(dev->hbm_data() + bias_hbm + 4 * i, DType::kFp32, r.normal(1.0f));

  using kernels::kGpSimd;
  using kernels::kScalar;
  using kernels::kTensor;
  using kernels::kVector;
  kernels::ProgramBuilder b("executor_vs_device", core);
  std::vector<Instruction> seq;  // the same instructions in a valid sequential order
  const auto emit = [&](StreamId s, const Instruction& in) {
    b.emit(s, in);
    seq.push_back(in);
  };
  const DType bf = DType::kBf16, f32 = DType::kFp32, i32 = DType::kInt32;
  const AccessPattern a_sb = isa::sbuf_tile(bf, K, 0, M), b_sb = isa::sbuf_tile(bf, K, 1024, N);
  const AccessPattern bias_sb = isa::sbuf_tile(f32, M, 2048, 1),
                      y = isa::sbuf_tile(f32, M, 4096, N);
  const AccessPattern acc = isa::sbuf_tile(f32, M, 5120, 1), z = isa::sbuf_tile(bf, M, 6144, N);
  const AccessPattern idx = isa::sbuf_tile(i32, M, 8192, N), mask = isa::sbuf_tile(i32, M, 9216, N);
  const AccessPattern sel = isa::sbuf_tile(f32, M, 10240, N),
                      red = isa::sbuf_tile(f32, M, 11264, 1);
  const AccessPattern ps = isa::psum_tile(f32, M, 0, N);
  const StreamId q0 = kernels::dma_queue(0), q1 = kernels::dma_queue(1), q2 = kernels::dma_queue(2);

  emit(q0, isa::dma_copy(a_sb, isa::hbm_rows(bf, a_hbm, K, M, M)));
  emit(q0, isa::dma_copy(b_sb, isa::hbm_rows(bf, b_hbm, K, N, N)));
  const auto t_in = b.mark(q0);
  emit(q1, isa::dma_copy(bias_sb, isa::hbm_rows(f32, bias_hbm, M, 1, 1)));
  const auto t_bias = b.mark(q1);
  b.wait(kTensor, t_in);
  emit(kTensor, isa::matmul(ps, a_sb, b_sb, false));
  emit(kTensor, isa::matmul(ps, a_sb, b_sb, true));
  const auto t_mm = b.mark(kTensor);
  b.wait(kScalar, t_mm);
  b.wait(kScalar, t_bias);
  Instruction act =
      isa::activation(y, ps, ActFunc::kGelu, isa::imm(0.5f), isa::per_partition(bias_sb));
  act.acc_dst = acc;
  act.has_acc_dst = true;
  emit(kScalar, act);
  const auto t_act = b.mark(kScalar);
  emit(kGpSimd, isa::iota(idx, -100, 3, {1}));
  emit(kGpSimd, isa::tensor_scalar(mask, idx, AluOp::kBitwiseAnd, isa::imm(1.0f)));
  const auto t_iota = b.mark(kGpSimd);
  b.wait(kVector, t_act);
  b.wait(kVector, t_iota);
  emit(kVector, isa::tensor_scalar(z, y, AluOp::kMultiply, isa::imm(2.0f), AluOp::kAdd,
                                   isa::per_partition(acc)));
  emit(kVector, isa::select(sel, mask, y, -1.0f));
  emit(kVector, isa::tensor_reduce(red, sel, ReduceOp::kMax));
  const auto t_v = b.mark(kVector);
  b.wait(q2, t_v);
  emit(q2, isa::dma_copy(isa::hbm_rows(bf, z_hbm, M, N, N), z));
  emit(q2, isa::dma_copy(isa::hbm_rows(f32, sel_hbm, M, N, N), sel));
  emit(q2, isa::dma_copy(isa::hbm_rows(f32, red_hbm, M, 1, 1), red));
  emit(q2, isa::dma_copy(isa::hbm_rows(f32, acc_hbm, M, 1, 1), acc));
  const Program program = std::move(b).build();

  OnChipMemory sbuf(core.sbuf.partitions, core.sbuf.partition_bytes);
  OnChipMemory psum(core.psum.partitions, core.psum.partition_bytes);
  HbmStorage hbm(kWindow, 1);
  std::memcpy(hbm.data(), dev->hbm_data(), kWindow);
  const MemoryMap mem{&sbuf, &psum, &hbm};
  for (const Instruction& in : seq) execute(in, mem);

  dev->run(0, program);
  const auto diff = std::mismatch(hbm.data(), hbm.data() + kWindow, dev->hbm_data());
  EXPECT_EQ(diff.first, hbm.data() + kWindow)
      << "first difference at HBM byte " << (diff.first - hbm.data());

  // The outputs are real results, not untouched memory: odd columns selected, even ones -1,
  // and the reduce is the row maximum of the selected GELU values.
  const float* sel_out = reinterpret_cast<const float*>(dev->hbm_data() + sel_hbm);
  const float* red_out = reinterpret_cast<const float*>(dev->hbm_data() + red_hbm);
  for (uint32_t m = 0; m < M; ++m) {
    float row_max = -kInf;
    for (uint32_t n = 0; n < N; ++n) {
      const float v = sel_out[m * N + n];
      const bool odd = ((-100 + 3 * int(m) + int(n)) & 1) != 0;
      if (odd) {
        ASSERT_GE(v, -0.2f) << m << "," << n;  // GELU >= -0.17
      } else {
        ASSERT_EQ(v, -1.0f) << m << "," << n;
      }
      row_max = std::max(row_max, v);
    }
    ASSERT_EQ(red_out[m], row_max) << m;
  }
}

}  // namespace
}  // namespace neuronsim::device_model
