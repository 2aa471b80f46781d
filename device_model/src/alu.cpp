// Scalar semantics of ALU operators and activation functions (fp32; integer ALU exact).
#include <cmath>
#include <limits>

#include "neuronsim/device_model/executor.h"

namespace neuronsim::device_model {
namespace {
float nan_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return a < b ? b : a;
}
float nan_min(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return b < a ? b : a;
}
float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}
// float -> int64 truncating, with NaN -> 0 and saturation where a plain cast is undefined.
int64_t to_int(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63f) return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63f) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

float apply_alu_float(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::kBypass:
      return a;
    case AluOp::kAdd:
      return a + b;
    case AluOp::kSubtract:
      return a - b;
    case AluOp::kMultiply:
      return a * b;
    case AluOp::kDivide:
      return a / b;
    case AluOp::kMax:
      return nan_max(a, b);
    case AluOp::kMin:
      return nan_min(a, b);
    case AluOp::kPow:
      return std::pow(a, b);
    case AluOp::kMod:
      return std::fmod(a, b);
    case AluOp::kAbsMax:
      return nan_max(std::fabs(a), std::fabs(b));
    case AluOp::kIsEqual:
      return a == b ? 1.0f : 0.0f;
    case AluOp::kNotEqual:
      return a != b ? 1.0f : 0.0f;
    case AluOp::kIsGt:
      return a > b ? 1.0f : 0.0f;
    case AluOp::kIsGe:
      return a >= b ? 1.0f : 0.0f;
    case AluOp::kIsLt:
      return a < b ? 1.0f : 0.0f;
    case AluOp::kIsLe:
      return a <= b ? 1.0f : 0.0f;
    case AluOp::kLogicalAnd:
      return (a != 0.0f && b != 0.0f) ? 1.0f : 0.0f;
    case AluOp::kLogicalOr:
      return (a != 0.0f || b != 0.0f) ? 1.0f : 0.0f;
    case AluOp::kLogicalXor:
      return ((a != 0.0f) != (b != 0.0f)) ? 1.0f : 0.0f;
    default:
      // Bitwise operators are validated to integer operands; on floats they act on the
      // truncated integer values. A float step before them (tensor_scalar's alu0, a float
      // operand) can still yield NaN or inf: those saturate instead of an undefined cast.
      return static_cast<float>(apply_alu_int(op, to_int(a), to_int(b)));
  }
}

int64_t apply_alu_int(AluOp op, int64_t a, int64_t b) {
  // 32-bit two's-complement semantics: operands and results wrap as int32 would.
  const auto wrap = [](int64_t v) {
    return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v)));
  };
  switch (op) {
    case AluOp::kBypass:
      return a;
    case AluOp::kAdd:
      return wrap(a + b);
    case AluOp::kSubtract:
      return wrap(a - b);
    case AluOp::kMultiply:
      return wrap(a * b);
    case AluOp::kDivide:
      return b == 0 ? 0 : wrap(a / b);  // division by zero gives 0 (defined)
    case AluOp::kMax:
      return a < b ? b : a;
    case AluOp::kMin:
      return b < a ? b : a;
    case AluOp::kPow: {
      if (b < 0) return (a == 1) ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      int64_t r = 1, base = a;
      for (int64_t e = b; e > 0; e >>= 1) {
        if (e & 1) r = wrap(r * base);
        base = wrap(base * base);
      }
      return r;
    }
    case AluOp::kMod:
      return b == 0 ? 0 : a % b;
    case AluOp::kAbsMax:
      return wrap(std::max(a < 0 ? -a : a, b < 0 ? -b : b));  // |INT32_MIN|
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
      return (a != 0 && b != 0);
    case AluOp::kLogicalOr:
      return (a != 0 || b != 0);
    case AluOp::kLogicalXor:
      return ((a != 0) != (b != 0));
    case AluOp::kBitwiseAnd:
      return a & b;
    case AluOp::kBitwiseOr:
      return a | b;
    case AluOp::kBitwiseXor:
      return a ^ b;
    case AluOp::kShiftLeft:
      return wrap(static_cast<int64_t>(static_cast<uint32_t>(a) << (b & 31)));
    case AluOp::kShiftRight:  // logical shift: the ISA has no arithmetic shift right
      return wrap(static_cast<int64_t>(static_cast<uint32_t>(a) >> (b & 31)));
  }
  return 0;
}

float apply_activation(ActFunc f, float x) {
  switch (f) {
    case ActFunc::kCopy:
      return x;
    case ActFunc::kRelu:
      return x > 0.0f ? x : (std::isnan(x) ? x : 0.0f);
    case ActFunc::kGelu:
      return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
    case ActFunc::kGeluTanh: {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
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
    case ActFunc::kSqrt:
      return std::sqrt(x);
    case ActFunc::kRsqrt:
      return 1.0f / std::sqrt(x);
    case ActFunc::kReciprocal:
      return 1.0f / x;
    case ActFunc::kSquare:
      return x * x;
    case ActFunc::kSoftplus:
      return softplus(x);
    case ActFunc::kErf:
      return std::erf(x);
    case ActFunc::kAbs:
      return std::fabs(x);
    case ActFunc::kSign:  // (x > 0) - (x < 0), as PyTorch: sign(-0.0) = +0.0, sign(NaN) = 0
      return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case ActFunc::kSin:
      return std::sin(x);
    case ActFunc::kCos:
      return std::cos(x);
    case ActFunc::kMish:
      return x * std::tanh(softplus(x));
    case ActFunc::kGeluDx: {
      const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
      return cdf + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
    }
    case ActFunc::kSiluDx: {
      const float s = sigmoid(x);
      return s * (1.0f + x * (1.0f - s));
    }
  }
  return x;
}

}  // namespace neuronsim::device_model
