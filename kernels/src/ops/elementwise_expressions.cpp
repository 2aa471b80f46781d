// The elementwise ops as expressions (ops/expr_rule.h): each op's arithmetic on the engines,
// written with the CPU kernels' formulas and boundaries so ISA mode computes the CPU's values.
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;

using ExprFn = std::function<Arg(ExprOperands&, Expr&)>;
using SupportFn = std::function<bool(const ExprOperands&)>;

void reg(std::vector<OpRule>& ops, const std::string& name, ExprFn fn,
         SupportFn supports = nullptr) {
  OpRule r;
  r.name = name;
  r.expr = {std::move(fn), std::move(supports)};
  ops.push_back(std::move(r));
}

}  // namespace

Arg constant_power(Expr& e, Arg x, double p) {
  if (p == 1.0) return e.alu(AluOp::kBypass, x, Arg::constant(0));
  if (p == 2.0) return e.alu(AluOp::kMultiply, x, x);
  if (p == 3.0) return e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, x, x), x);
  if (p == 0.5) return e.act(ActFunc::kSqrt, x);
  if (p == -0.5) return e.act(ActFunc::kRsqrt, x);
  if (p == -1.0) return e.act(ActFunc::kReciprocal, x);
  if (p == 0.0) return e.alu(AluOp::kBypass, Arg::constant(1), Arg::constant(0));
  return e.alu(AluOp::kPow, x, Arg::constant(static_cast<float>(p)));
}

namespace {

// Floor division. Integers: the truncating quotient, one less when the remainder is nonzero
// and the signs differ. Floats: (a - fmod(a, b)) / b, corrected the same way, then floored and
// rounded (a - fmod is a multiple of b up to rounding); division by zero gives a / b.
Arg floor_divide(Expr& e, Arg a, Arg b) {
  const Arg zero = Arg::constant(0);
  const Arg m = e.alu(AluOp::kMod, a, b);
  const Arg signs_differ =
      e.alu(AluOp::kLogicalXor, e.alu(AluOp::kIsLt, b, zero), e.alu(AluOp::kIsLt, m, zero));
  const Arg adjust = e.alu(AluOp::kLogicalAnd, e.alu(AluOp::kNotEqual, m, zero), signs_differ);
  if (e.integer) return e.alu(AluOp::kSubtract, e.alu(AluOp::kDivide, a, b), adjust);
  const Arg d =
      e.alu(AluOp::kSubtract, e.alu(AluOp::kDivide, e.alu(AluOp::kSubtract, a, m), b), adjust);
  const Arg frac = e.alu(AluOp::kMod, d, Arg::constant(1));
  const Arg fl =
      e.alu(AluOp::kSubtract, e.alu(AluOp::kSubtract, d, frac), e.alu(AluOp::kIsLt, frac, zero));
  const Arg up = e.alu(AluOp::kIsGt, e.alu(AluOp::kSubtract, d, fl), Arg::constant(0.5f));
  const Arg r = e.alu(AluOp::kAdd, fl, up);
  return e.select(e.alu(AluOp::kIsEqual, b, zero), e.alu(AluOp::kDivide, a, b), r);
}

// Truncating division: exact on the integer ALU; floats drop the fraction of a / b (values of
// 2^23 and beyond, infinities and NaN are their own truncation).
Arg trunc_divide(Expr& e, Arg a, Arg b) {
  const Arg q = e.alu(AluOp::kDivide, a, b);
  if (e.integer) return q;
  const Arg t = e.alu(AluOp::kSubtract, q, e.alu(AluOp::kMod, q, Arg::constant(1)));
  const Arg big =
      e.alu(AluOp::kIsGe, e.alu(AluOp::kAbsMax, q, Arg::constant(0)), Arg::constant(8388608.0f));
  return e.select(big, q, t);
}

// Round half to even: floor(x + 0.5), minus one on an exact tie that landed on an odd number;
// values of 2^23 and beyond are integers already.
Arg round_half_even(Expr& e, Arg x) {
  const Arg t = e.alu(AluOp::kAdd, x, Arg::constant(0.5f));
  const Arg frac = e.alu(AluOp::kMod, t, Arg::constant(1));
  const Arg f = e.alu(AluOp::kSubtract, e.alu(AluOp::kSubtract, t, frac),
                      e.alu(AluOp::kIsLt, frac, Arg::constant(0)));
  const Arg tie =
      e.alu(AluOp::kLogicalAnd, e.alu(AluOp::kIsEqual, f, t),
            e.alu(AluOp::kNotEqual, e.alu(AluOp::kMod, f, Arg::constant(2)), Arg::constant(0)));
  const Arg r = e.alu(AluOp::kSubtract, f, tie);
  const Arg big =
      e.alu(AluOp::kIsGe, e.alu(AluOp::kAbsMax, x, Arg::constant(0)), Arg::constant(8388608.0f));
  return e.select(big, x, r);
}

// The largest finite value of a floating output dtype (nan_to_num's default for +inf).
float finite_max(ScalarType t) {
  switch (t) {
    case ScalarType::kBFloat16:
      return 3.38953139e38f;  // (2 - 2^-7) * 2^127
    case ScalarType::kFloat16:
      return 65504.0f;
    default:
      return std::numeric_limits<float>::max();
  }
}

// min(max(x + 3, 0), 6): hardsigmoid times 6, the CPU kernels' form of it.
Arg relu6_of_x_plus_3(Expr& e, Arg x) {
  return e.alu(AluOp::kMin,
               e.alu(AluOp::kMax, e.alu(AluOp::kAdd, x, Arg::constant(3)), Arg::constant(0)),
               Arg::constant(6));
}

// -l <= x <= l: where hardshrink, softshrink and their gradients are zero.
Arg within(Expr& e, Arg x, float l) {
  return e.alu(AluOp::kLogicalAnd, e.alu(AluOp::kIsGe, x, Arg::constant(-l)),
               e.alu(AluOp::kIsLe, x, Arg::constant(l)));
}

// erfinv: Giles' single-precision approximation ("Approximating the erfinv function", GPU
// Computing Gems, 2011): w = -log(1 - x^2), one of two polynomials in w (or sqrt(w)) times x.
// Both polynomials run on every element; the select keeps the one for its range. x = +-1 gives
// +-inf and |x| > 1 NaN through the log, as the CPU does.
Arg erfinv(Expr& e, Arg x) {
  const Arg one_minus_x2 = e.alu(AluOp::kSubtract, Arg::constant(1), e.alu(AluOp::kMultiply, x, x));
  const Arg w = e.alu(AluOp::kMultiply, e.act(ActFunc::kLog, one_minus_x2), Arg::constant(-1));
  auto horner = [&](Arg t, std::initializer_list<float> c) {
    const float* k = c.begin();
    Arg p =
        e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, t, Arg::constant(k[0])), Arg::constant(k[1]));
    for (size_t i = 2; i < c.size(); ++i)
      p = e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, p, t), Arg::constant(k[i]));
    return p;
  };
  const Arg central =
      horner(e.alu(AluOp::kSubtract, w, Arg::constant(2.5f)),
             {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f, -4.39150654e-06f, 0.00021858087f,
              -0.00125372503f, -0.00417768164f, 0.246640727f, 1.50140941f});
  const Arg tail =
      horner(e.alu(AluOp::kSubtract, e.act(ActFunc::kSqrt, w), Arg::constant(3)),
             {-0.000200214257f, 0.000100950558f, 0.00134934322f, -0.00367342844f, 0.00573950773f,
              -0.0076224613f, 0.00943887047f, 1.00167406f, 2.83297682f});
  const Arg p = e.select(e.alu(AluOp::kIsLt, w, Arg::constant(5)), central, tail);
  return e.alu(AluOp::kMultiply, p, x);
}

void unary_act(std::vector<OpRule>& ops, const std::string& name, ActFunc f, float scale = 1.0f,
               float bias = 0.0f) {
  reg(ops, name,
      [f, scale, bias](ExprOperands& o, Expr& e) { return e.act(f, o.get("self"), scale, bias); });
}

void binary_alu(std::vector<OpRule>& ops, const std::string& name, AluOp op) {
  reg(ops, name,
      [op](ExprOperands& o, Expr& e) { return e.alu(op, o.get("self"), o.get("other")); });
}

}  // namespace

std::vector<OpRule> elementwise_expression_rules() {
  std::vector<OpRule> ops;
  // Unary functions on ScalarE: f(x * scale + bias).
  struct UnaryAct {
    const char* name;
    ActFunc f;
    float scale, bias;
  };
  for (const UnaryAct& u : {UnaryAct{"aten::exp", ActFunc::kExp, 1.0f, 0.0f},
                            {"aten::log", ActFunc::kLog, 1.0f, 0.0f},
                            {"aten::sqrt", ActFunc::kSqrt, 1.0f, 0.0f},
                            {"aten::rsqrt", ActFunc::kRsqrt, 1.0f, 0.0f},
                            {"aten::sigmoid", ActFunc::kSigmoid, 1.0f, 0.0f},
                            {"aten::tanh", ActFunc::kTanh, 1.0f, 0.0f},
                            {"aten::erf", ActFunc::kErf, 1.0f, 0.0f},
                            {"aten::sin", ActFunc::kSin, 1.0f, 0.0f},
                            {"aten::cos", ActFunc::kCos, 1.0f, 0.0f},
                            {"aten::reciprocal", ActFunc::kReciprocal, 1.0f, 0.0f},
                            {"aten::sign", ActFunc::kSign, 1.0f, 0.0f},
                            {"aten::sgn", ActFunc::kSign, 1.0f, 0.0f},  // real dtypes
                            {"aten::silu", ActFunc::kSilu, 1.0f, 0.0f},
                            {"aten::mish", ActFunc::kMish, 1.0f, 0.0f},
                            {"aten::log1p", ActFunc::kLog, 1.0f, 1.0f},
                            {"aten::exp2", ActFunc::kExp, 0.6931471805599453f, 0.0f}}) {
    unary_act(ops, u.name, u.f, u.scale, u.bias);
  }
  reg(ops, "aten::expm1", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kSubtract, e.act(ActFunc::kExp, o.get("self")), Arg::constant(1));
  });
  reg(ops, "aten::log2", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMultiply, e.act(ActFunc::kLog, o.get("self")),
                 Arg::constant(1.4426950408889634f));
  });
  reg(ops, "aten::gelu", [](ExprOperands& o, Expr& e) {
    return e.act(o.str("approximate") == "tanh" ? ActFunc::kGeluTanh : ActFunc::kGelu,
                 o.get("self"));
  });
  reg(ops, "aten::softplus", [](ExprOperands& o, Expr& e) {
    // softplus(x) = log1p(exp(beta x)) / beta, linear above threshold.
    const float beta = o.num("beta", 1.0), threshold = o.num("threshold", 20.0);
    const Arg x = o.get("self");
    const Arg sp =
        e.alu(AluOp::kMultiply, e.act(ActFunc::kSoftplus, x, beta), Arg::constant(1.0f / beta));
    const Arg big = e.alu(AluOp::kIsGt, e.alu(AluOp::kMultiply, x, Arg::constant(beta)),
                          Arg::constant(threshold));
    return e.select(big, x, sp);
  });
  // Unary ALU ops on VectorE (exact for integers too).
  reg(ops, "aten::abs", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kAbsMax, o.get("self"), Arg::constant(0));
  });
  reg(ops, "aten::neg", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMultiply, o.get("self"), Arg::constant(-1));
  });
  reg(ops, "aten::relu",
      [](ExprOperands& o, Expr& e) { return e.alu(AluOp::kMax, o.get("self"), Arg::constant(0)); });
  reg(ops, "aten::logical_not", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kIsEqual, o.get("self"), Arg::constant(0));
  });
  reg(ops, "aten::isnan", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.alu(AluOp::kNotEqual, x, x);
  });
  reg(ops, "aten::isinf", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kIsEqual, e.alu(AluOp::kAbsMax, o.get("self"), Arg::constant(0)),
                 Arg::constant(std::numeric_limits<float>::infinity()));
  });
  reg(ops, "aten::isposinf", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kIsEqual, o.get("self"),
                 Arg::constant(std::numeric_limits<float>::infinity()));
  });
  reg(ops, "aten::isneginf", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kIsEqual, o.get("self"),
                 Arg::constant(-std::numeric_limits<float>::infinity()));
  });
  reg(ops, "aten::isfinite", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kIsLt, e.alu(AluOp::kAbsMax, o.get("self"), Arg::constant(0)),
                 Arg::constant(std::numeric_limits<float>::infinity()));
  });
  // Rounding from the fractional part (fmod keeps the sign of x); values >= 2^23 are integers.
  reg(ops, "aten::trunc", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.alu(AluOp::kSubtract, x, e.alu(AluOp::kMod, x, Arg::constant(1)));
  });
  for (const char* n : {"aten::floor", "aten::ceil"}) {
    const bool up = std::string(n) == "aten::ceil";
    reg(ops, n, [up](ExprOperands& o, Expr& e) {
      const Arg x = o.get("self");
      const Arg frac = e.alu(AluOp::kMod, x, Arg::constant(1));
      const Arg t = e.alu(AluOp::kSubtract, x, frac);
      const Arg adjust = e.alu(up ? AluOp::kIsGt : AluOp::kIsLt, frac, Arg::constant(0));
      return e.alu(up ? AluOp::kAdd : AluOp::kSubtract, t, adjust);
    });
  }
  reg(
      ops, "aten::round",
      [](ExprOperands& o, Expr& e) {
        const Arg x = o.get("self");
        if (!o.has("decimals") || o.num("decimals", 0) == 0) return round_half_even(e, x);
        // The CPU's round(x, decimals): x * 10^d rounded, / 10^d (for d < 0: x / 10^-d rounded,
        // * 10^-d), the power computed in float as the CPU's kernel does.
        const float d = o.num("decimals", 0);
        const float ten_pow = std::pow(10.0f, std::abs(d));
        if (d < 0) {
          return e.alu(AluOp::kMultiply,
                       round_half_even(e, e.alu(AluOp::kDivide, x, Arg::constant(ten_pow))),
                       Arg::constant(ten_pow));
        }
        return e.alu(AluOp::kDivide,
                     round_half_even(e, e.alu(AluOp::kMultiply, x, Arg::constant(ten_pow))),
                     Arg::constant(ten_pow));
      },
      [](const ExprOperands& o) {
        // Integer inputs with decimals keep the CPU's error (round is not defined for them).
        return !o.has("decimals") || o.num("decimals", 0) == 0 || is_floating(o.type("self"));
      });
  // ~x: a bool's is logical not; an unsigned byte's flips its 8 bits (x ^ -1 would leave the
  // byte's range and saturate to 0 on the store); signed integers flip every bit.
  reg(ops, "aten::bitwise_not", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    if (o.out_type() == ScalarType::kBool) return e.alu(AluOp::kIsEqual, x, Arg::constant(0));
    if (o.out_type() == ScalarType::kUInt8) return e.alu(AluOp::kBitwiseXor, x, Arg::constant(255));
    return e.alu(AluOp::kBitwiseXor, x, Arg::constant(-1));
  });

  reg(ops, "aten::erfinv", [](ExprOperands& o, Expr& e) { return erfinv(e, o.get("self")); });
  // Shifts, as the CPU computes them: a shift by a negative amount or by the element width or
  // more gives 0 (left) or the sign fill (right). The ALU shifts right logically, so an
  // arithmetic shift of a negative value is ~(~a >> b).
  for (const char* n : {"aten::bitwise_left_shift", "aten::__lshift__", "aten::__ilshift__"}) {
    reg(ops, n, [](ExprOperands& o, Expr& e) {
      const Arg a = o.get("self"), b = o.get("other");
      const Arg out_of_range =
          e.alu(AluOp::kLogicalOr, e.alu(AluOp::kIsLt, b, Arg::constant(0)),
                e.alu(AluOp::kIsGe, b, Arg::constant(static_cast<float>(o.out_bits()))));
      return e.select(out_of_range, Arg::constant(0), e.alu(AluOp::kShiftLeft, a, b));
    });
  }
  for (const char* n : {"aten::bitwise_right_shift", "aten::__rshift__", "aten::__irshift__"}) {
    reg(ops, n, [](ExprOperands& o, Expr& e) {
      const Arg a = o.get("self"), b = o.get("other");
      const Arg amount = e.select(e.alu(AluOp::kIsLt, b, Arg::constant(0)), Arg::constant(31),
                                  e.alu(AluOp::kMin, b, Arg::constant(31)));
      const Arg inverted = e.alu(AluOp::kBitwiseXor, a, Arg::constant(-1));
      const Arg negative =
          e.alu(AluOp::kBitwiseXor, e.alu(AluOp::kShiftRight, inverted, amount), Arg::constant(-1));
      return e.select(e.alu(AluOp::kIsLt, a, Arg::constant(0)), negative,
                      e.alu(AluOp::kShiftRight, a, amount));
    });
  }

  // Binary arithmetic and comparisons.
  for (const char* n : {"aten::add", "aten::sub"}) {
    const AluOp op = std::string(n) == "aten::add" ? AluOp::kAdd : AluOp::kSubtract;
    reg(ops, n, [op](ExprOperands& o, Expr& e) {
      const float alpha = o.num("alpha", 1.0);
      Arg b = o.get("other");
      if (alpha != 1.0f) b = e.alu(AluOp::kMultiply, b, Arg::constant(alpha));
      return e.alu(op, o.get("self"), b);
    });
  }
  reg(ops, "aten::rsub", [](ExprOperands& o, Expr& e) {
    const float alpha = o.num("alpha", 1.0);
    Arg a = o.get("self");
    if (alpha != 1.0f) a = e.alu(AluOp::kMultiply, a, Arg::constant(alpha));
    return e.alu(AluOp::kSubtract, o.get("other"), a);
  });
  for (const auto& [name, op] :
       std::initializer_list<std::pair<const char*, AluOp>>{{"aten::mul", AluOp::kMultiply},
                                                            {"aten::maximum", AluOp::kMax},
                                                            {"aten::minimum", AluOp::kMin},
                                                            {"aten::fmod", AluOp::kMod}}) {
    binary_alu(ops, name, op);
  }
  // div with rounding_mode and floor_divide: the CPU's formulas (c10::div_floor_floating,
  // div_floor_integer, trunc), step by step, so ISA mode rounds as the CPU does.
  reg(ops, "aten::div", [](ExprOperands& o, Expr& e) {
    const std::string mode = o.str("rounding_mode");
    const Arg a = o.get("self"), b = o.get("other");
    if (mode == "floor") return floor_divide(e, a, b);
    if (mode == "trunc") return trunc_divide(e, a, b);
    return e.alu(AluOp::kDivide, a, b);
  });
  reg(ops, "aten::floor_divide",
      [](ExprOperands& o, Expr& e) { return floor_divide(e, o.get("self"), o.get("other")); });
  reg(ops, "aten::remainder", [](ExprOperands& o, Expr& e) {
    // Python's modulo: fmod, then shifted by the divisor when the signs differ. A select, not
    // r + adjust * b: with an infinite divisor 0 * inf would make every result NaN
    // (remainder(3, inf) is 3 on the CPU).
    const Arg a = o.get("self"), b = o.get("other");
    const Arg r = e.alu(AluOp::kMod, a, b);
    const Arg differ = e.alu(AluOp::kLogicalXor, e.alu(AluOp::kIsLt, r, Arg::constant(0)),
                             e.alu(AluOp::kIsLt, b, Arg::constant(0)));
    const Arg adjust =
        e.alu(AluOp::kLogicalAnd, differ, e.alu(AluOp::kNotEqual, r, Arg::constant(0)));
    return e.select(adjust, e.alu(AluOp::kAdd, r, b), r);
  });
  for (const auto& [name, op] : std::initializer_list<std::pair<const char*, AluOp>>{
           {"aten::eq", AluOp::kIsEqual},
           {"aten::ne", AluOp::kNotEqual},
           {"aten::lt", AluOp::kIsLt},
           {"aten::le", AluOp::kIsLe},
           {"aten::gt", AluOp::kIsGt},
           {"aten::ge", AluOp::kIsGe},
           // Logic and bits.
           {"aten::logical_and", AluOp::kLogicalAnd},
           {"aten::logical_or", AluOp::kLogicalOr},
           {"aten::logical_xor", AluOp::kLogicalXor},
           {"aten::bitwise_and", AluOp::kBitwiseAnd},
           {"aten::bitwise_or", AluOp::kBitwiseOr},
           {"aten::bitwise_xor", AluOp::kBitwiseXor}}) {
    binary_alu(ops, name, op);
  }
  reg(ops, "aten::pow", [](ExprOperands& o, Expr& e) {
    if (o.is_tensor("self") && !o.is_tensor("exponent"))
      return constant_power(e, o.get("self"), o.num("exponent", 1.0));
    return e.alu(AluOp::kPow, o.get("self"), o.get("exponent"));
  });
  reg(ops, "aten::clamp", [](ExprOperands& o, Expr& e) {
    Arg x = o.get("self");
    if (o.has("min")) x = e.alu(AluOp::kMax, x, o.get("min"));
    if (o.has("max")) x = e.alu(AluOp::kMin, x, o.get("max"));
    if (x.kind == Arg::kInput) x = e.alu(AluOp::kBypass, x, Arg::constant(0));
    return x;
  });
  reg(ops, "aten::clamp_min",
      [](ExprOperands& o, Expr& e) { return e.alu(AluOp::kMax, o.get("self"), o.get("min")); });
  reg(ops, "aten::clamp_max",
      [](ExprOperands& o, Expr& e) { return e.alu(AluOp::kMin, o.get("self"), o.get("max")); });
  reg(ops, "aten::hardtanh", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMin, e.alu(AluOp::kMax, o.get("self"), o.get("min_val")),
                 o.get("max_val"));
  });
  reg(ops, "aten::leaky_relu", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.select(e.alu(AluOp::kIsGt, x, Arg::constant(0)), x,
                    e.alu(AluOp::kMultiply, x, o.get("negative_slope")));
  });
  reg(ops, "aten::threshold", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.select(e.alu(AluOp::kIsGt, x, o.get("threshold")), x, o.get("value"));
  });
  reg(ops, "aten::where", [](ExprOperands& o, Expr& e) {
    return e.select(o.get("condition"), o.get("self"), o.get("other"));
  });
  reg(ops, "aten::masked_fill", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.select(o.get("mask"), o.get("value"), x);
  });
  reg(ops, "aten::lerp", [](ExprOperands& o, Expr& e) {
    const Arg a = o.get("self"), b = o.get("end");
    return e.alu(AluOp::kAdd, a,
                 e.alu(AluOp::kMultiply, o.get("weight"), e.alu(AluOp::kSubtract, b, a)));
  });
  reg(ops, "aten::addcmul", [](ExprOperands& o, Expr& e) {
    const Arg t = e.alu(AluOp::kMultiply, o.get("tensor1"), o.get("tensor2"));
    return e.alu(AluOp::kAdd, o.get("self"), e.alu(AluOp::kMultiply, t, o.get("value")));
  });
  reg(ops, "aten::addcdiv", [](ExprOperands& o, Expr& e) {
    const Arg t = e.alu(AluOp::kDivide, o.get("tensor1"), o.get("tensor2"));
    return e.alu(AluOp::kAdd, o.get("self"), e.alu(AluOp::kMultiply, t, o.get("value")));
  });

  // Backward kernels autograd needs.
  reg(ops, "aten::threshold_backward", [](ExprOperands& o, Expr& e) {
    return e.select(e.alu(AluOp::kIsGt, o.get("self"), o.get("threshold")), o.get("grad_output"),
                    Arg::constant(0));
  });
  reg(ops, "aten::gelu_backward", [](ExprOperands& o, Expr& e) {
    const Arg g = o.get("grad_output"), x = o.get("self");
    if (o.str("approximate") != "tanh")
      return e.alu(AluOp::kMultiply, g, e.act(ActFunc::kGeluDx, x));
    // d/dx 0.5 x (1 + tanh(k (x + c x^3))) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
    const float k = 0.7978845608028654f, c = 0.044715f;
    const Arg x2 = e.alu(AluOp::kMultiply, x, x);
    const Arg inner = e.alu(
        AluOp::kMultiply,
        e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, x2, Arg::constant(c)), Arg::constant(1)), x);
    const Arg t = e.act(ActFunc::kTanh, inner, k);
    const Arg left =
        e.alu(AluOp::kMultiply, e.alu(AluOp::kAdd, t, Arg::constant(1)), Arg::constant(0.5f));
    const Arg one_minus_t2 =
        e.alu(AluOp::kSubtract, Arg::constant(1), e.alu(AluOp::kMultiply, t, t));
    const Arg dinner =
        e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, x2, Arg::constant(3 * c * k)), Arg::constant(k));
    const Arg right = e.alu(
        AluOp::kMultiply,
        e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, x, Arg::constant(0.5f)), one_minus_t2),
        dinner);
    return e.alu(AluOp::kMultiply, g, e.alu(AluOp::kAdd, left, right));
  });
  reg(ops, "aten::silu_backward", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMultiply, o.get("grad_output"), e.act(ActFunc::kSiluDx, o.get("self")));
  });
  reg(ops, "aten::softplus_backward", [](ExprOperands& o, Expr& e) {
    // The CPU's formula: z = exp(beta x); g * z / (z + 1), g itself above the threshold.
    const float beta = o.num("beta", 1.0), threshold = o.num("threshold", 20.0);
    const Arg x = o.get("self"), g = o.get("grad_output");
    const Arg z = e.act(ActFunc::kExp, x, beta);
    const Arg d = e.alu(AluOp::kDivide, z, e.alu(AluOp::kAdd, z, Arg::constant(1)));
    const Arg big = e.alu(AluOp::kIsGt, e.alu(AluOp::kMultiply, x, Arg::constant(beta)),
                          Arg::constant(threshold));
    return e.select(big, g, e.alu(AluOp::kMultiply, g, d));
  });
  reg(ops, "aten::log_sigmoid_backward", [](ExprOperands& o, Expr& e) {
    // The CPU's formula with its forward's buffer z = exp(-|x|):
    // (max_deriv - sign * z / (1 + z)) * g, max_deriv = x < 0, sign = x < 0 ? 1 : -1.
    const Arg x = o.get("self"), z = o.get("buffer");
    const Arg neg = e.alu(AluOp::kIsLt, x, Arg::constant(0));
    const Arg sign =
        e.alu(AluOp::kSubtract, e.alu(AluOp::kMultiply, neg, Arg::constant(2)), Arg::constant(1));
    const Arg frac = e.alu(AluOp::kDivide, z, e.alu(AluOp::kAdd, Arg::constant(1), z));
    return e.alu(AluOp::kMultiply,
                 e.alu(AluOp::kSubtract, neg, e.alu(AluOp::kMultiply, sign, frac)),
                 o.get("grad_output"));
  });
  reg(ops, "aten::sigmoid_backward", [](ExprOperands& o, Expr& e) {
    const Arg y = o.get("output");
    const Arg d = e.alu(AluOp::kMultiply, y, e.alu(AluOp::kSubtract, Arg::constant(1), y));
    return e.alu(AluOp::kMultiply, o.get("grad_output"), d);
  });
  reg(ops, "aten::tanh_backward", [](ExprOperands& o, Expr& e) {
    const Arg y = o.get("output");
    const Arg d = e.alu(AluOp::kSubtract, Arg::constant(1), e.alu(AluOp::kMultiply, y, y));
    return e.alu(AluOp::kMultiply, o.get("grad_output"), d);
  });
  reg(ops, "aten::leaky_relu_backward", [](ExprOperands& o, Expr& e) {
    const Arg g = o.get("grad_output");
    return e.select(e.alu(AluOp::kIsGt, o.get("self"), Arg::constant(0)), g,
                    e.alu(AluOp::kMultiply, g, o.get("negative_slope")));
  });
  reg(ops, "aten::hardtanh_backward", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    const Arg inside = e.alu(AluOp::kLogicalAnd, e.alu(AluOp::kIsGt, x, o.get("min_val")),
                             e.alu(AluOp::kIsLt, x, o.get("max_val")));
    return e.select(inside, o.get("grad_output"), Arg::constant(0));
  });
  // Activations of mobile CNNs and their gradients, with the CPU's formulas and boundaries.
  reg(ops, "aten::hardsigmoid", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kDivide, relu6_of_x_plus_3(e, o.get("self")), Arg::constant(6));
  });
  reg(ops, "aten::hardsigmoid_backward", [](ExprOperands& o, Expr& e) {
    // g / 6 strictly inside (-3, 3), else 0.
    const Arg x = o.get("self");
    const Arg inside = e.alu(AluOp::kLogicalAnd, e.alu(AluOp::kIsGt, x, Arg::constant(-3)),
                             e.alu(AluOp::kIsLt, x, Arg::constant(3)));
    return e.select(inside, e.alu(AluOp::kDivide, o.get("grad_output"), Arg::constant(6)),
                    Arg::constant(0));
  });
  reg(ops, "aten::hardswish", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.alu(AluOp::kDivide, e.alu(AluOp::kMultiply, x, relu6_of_x_plus_3(e, x)),
                 Arg::constant(6));
  });
  reg(ops, "aten::hardswish_backward", [](ExprOperands& o, Expr& e) {
    // 0 up to -3 inclusive, g (x / 3 + 0.5) below 3, g from 3 on (the CPU kernel's bounds).
    const Arg g = o.get("grad_output"), x = o.get("self");
    const Arg mid =
        e.alu(AluOp::kMultiply, g,
              e.alu(AluOp::kAdd, e.alu(AluOp::kDivide, x, Arg::constant(3)), Arg::constant(0.5f)));
    const Arg upper = e.select(e.alu(AluOp::kIsLt, x, Arg::constant(3)), mid, g);
    return e.select(e.alu(AluOp::kIsLe, x, Arg::constant(-3)), Arg::constant(0), upper);
  });
  reg(ops, "aten::elu", [](ExprOperands& o, Expr& e) {
    // x <= 0: (exp(x * input_scale) - 1) * alpha * scale; else x * scale (selu and celu are elu).
    const Arg x = o.get("self");
    const float alpha = o.num("alpha", 1.0), scale = o.num("scale", 1.0);
    const float input_scale = o.num("input_scale", 1.0);
    const Arg neg =
        e.alu(AluOp::kMultiply,
              e.alu(AluOp::kSubtract, e.act(ActFunc::kExp, x, input_scale), Arg::constant(1)),
              Arg::constant(alpha * scale));
    return e.select(e.alu(AluOp::kIsLe, x, Arg::constant(0)), neg,
                    e.alu(AluOp::kMultiply, x, Arg::constant(scale)));
  });
  reg(ops, "aten::elu_backward", [](ExprOperands& o, Expr& e) {
    // From the input: g * input_scale * alpha * scale * exp(x * input_scale) where x <= 0; from
    // the result y: g * input_scale * (y + alpha * scale) where y <= 0; g * scale elsewhere.
    const Arg g = o.get("grad_output"), v = o.get("self_or_result");
    const float alpha = o.num("alpha", 1.0), scale = o.num("scale", 1.0);
    const float input_scale = o.num("input_scale", 1.0);
    const bool is_result = o.num("is_result", 0) != 0;
    const Arg neg =
        is_result ? e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, g, Arg::constant(input_scale)),
                          e.alu(AluOp::kAdd, v, Arg::constant(alpha * scale)))
                  : e.alu(AluOp::kMultiply,
                          e.alu(AluOp::kMultiply, g, Arg::constant(input_scale * alpha * scale)),
                          e.act(ActFunc::kExp, v, input_scale));
    return e.select(e.alu(AluOp::kIsLe, v, Arg::constant(0)), neg,
                    e.alu(AluOp::kMultiply, g, Arg::constant(scale)));
  });
  reg(ops, "aten::hardshrink", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self");
    return e.select(within(e, x, o.num("lambd", 0.5)), Arg::constant(0), x);
  });
  reg(ops, "aten::softshrink", [](ExprOperands& o, Expr& e) {
    // x - l above l, x + l below -l, 0 between.
    const Arg x = o.get("self");
    const float l = o.num("lambd", 0.5);
    const Arg below = e.select(e.alu(AluOp::kIsLt, x, Arg::constant(-l)),
                               e.alu(AluOp::kAdd, x, Arg::constant(l)), Arg::constant(0));
    return e.select(e.alu(AluOp::kIsGt, x, Arg::constant(l)),
                    e.alu(AluOp::kSubtract, x, Arg::constant(l)), below);
  });
  for (const char* n : {"aten::hardshrink_backward", "aten::softshrink_backward"}) {
    const std::string grad =
        std::string(n) == "aten::hardshrink_backward" ? "grad_out" : "grad_output";
    reg(ops, n, [grad](ExprOperands& o, Expr& e) {
      return e.select(within(e, o.get("self"), o.num("lambd", 0.5)), Arg::constant(0), o.get(grad));
    });
  }
  reg(ops, "aten::log10", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMultiply, e.act(ActFunc::kLog, o.get("self")),
                 Arg::constant(0.4342944819032518f));
  });
  reg(
      ops, "aten::nan_to_num",
      [](ExprOperands& o, Expr& e) {
        // NaN -> nan (0), +inf -> posinf, -inf -> neginf (the dtype's finite extremes).
        const Arg x = o.get("self");
        const float big = finite_max(o.out_type());
        const Arg nan = Arg::constant(o.has("nan") ? o.num("nan", 0) : 0.0f);
        const Arg pos = Arg::constant(o.has("posinf") ? o.num("posinf", 0) : big);
        const Arg neg = Arg::constant(o.has("neginf") ? o.num("neginf", 0) : -big);
        const float inf = std::numeric_limits<float>::infinity();
        const Arg r = e.select(e.alu(AluOp::kIsEqual, x, Arg::constant(inf)), pos,
                               e.select(e.alu(AluOp::kIsEqual, x, Arg::constant(-inf)), neg, x));
        return e.select(e.alu(AluOp::kNotEqual, x, x), nan, r);
      },
      [](const ExprOperands& o) {
        // Integers have no NaN or infinity: the CPU copies them.
        return is_floating(o.type("self"));
      });
  reg(ops, "aten::native_dropout_backward", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, o.get("grad_output"), o.get("mask")),
                 o.get("scale"));
  });

  reg(ops, "aten::fill", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kBypass, o.get("value"), Arg::constant(0));
  });
  // hypot(x, y) = sqrt(x^2 + y^2) without the squares' overflow, as std::hypot computes it:
  // m * sqrt(1 + (n / m)^2) with m = max(|x|, |y|), n = min(|x|, |y|); 0 when both are 0; NaN
  // where either is NaN, unless either is infinite, which gives inf.
  reg(ops, "aten::hypot", [](ExprOperands& o, Expr& e) {
    const float inf = std::numeric_limits<float>::infinity();
    const Arg x = o.get("self"), y = o.get("other");
    const Arg ax = e.alu(AluOp::kAbsMax, x, Arg::constant(0));
    const Arg ay = e.alu(AluOp::kAbsMax, y, Arg::constant(0));
    const Arg m = e.alu(AluOp::kMax, ax, ay), n = e.alu(AluOp::kMin, ax, ay);
    const Arg q = e.alu(AluOp::kDivide, n, m);
    const Arg r = e.alu(AluOp::kMultiply, m,
                        e.act(ActFunc::kSqrt, e.alu(AluOp::kMultiply, q, q), 1.0f, 1.0f));
    const Arg finite = e.select(e.alu(AluOp::kIsEqual, m, Arg::constant(0)), Arg::constant(0), r);
    const Arg nan =
        e.alu(AluOp::kLogicalOr, e.alu(AluOp::kNotEqual, x, x), e.alu(AluOp::kNotEqual, y, y));
    const Arg either_inf = e.alu(AluOp::kLogicalOr, e.alu(AluOp::kIsEqual, ax, Arg::constant(inf)),
                                 e.alu(AluOp::kIsEqual, ay, Arg::constant(inf)));
    return e.select(either_inf, Arg::constant(inf),
                    e.select(nan, Arg::constant(std::numeric_limits<float>::quiet_NaN()), finite));
  });
  // xlogy: x * log(y), 0 where x == 0 unless y is NaN (the CPU's rule).
  reg(ops, "aten::xlogy", [](ExprOperands& o, Expr& e) {
    const Arg x = o.get("self"), y = o.get("other");
    const Arg zero_x = e.select(e.alu(AluOp::kIsEqual, x, Arg::constant(0)), Arg::constant(0),
                                e.alu(AluOp::kMultiply, x, e.act(ActFunc::kLog, y)));
    return e.select(e.alu(AluOp::kIsEqual, y, y), zero_x, y);  // y != y: NaN
  });
  // a * b + c: what aten::lerp decomposes into in compiled graphs (no eager kernel: a prim).
  reg(ops, "prims::fma", [](ExprOperands& o, Expr& e) {
    return e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, o.get("a"), o.get("b")), o.get("c"));
  });
  return ops;
}

}  // namespace neuronsim::kernels::ops
