// The op library's elementwise rules (kernels/src/ops/elementwise_expressions.cpp), torch-free:
// each rule's eager program, built from a call as the backend would make it, runs in full mode on
// the device and matches the CPU's formula on values that include the edges (zeros, negatives,
// infinities, NaN, magnitudes whose squares overflow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "neuronsim/kernels/ops/op_rule.h"
#include "op_call_fixture.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using kernels::ops::ScalarType;
using testing::FakeOpCall;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Operand values: 300 of them (more rows than one tile), the edges first.
std::vector<float> values(int which) {
  std::vector<float> v = {0.0f,  -0.0f,  1.0f,   -1.0f, 2.5f,  -2.5f, 3.0f, -3.0f, 7.0f,  -7.0f,
                          3e30f, -3e30f, 1e-30f, kInf,  -kInf, kNan,  0.5f, -0.5f, 1e20f, 6.0f};
  if (which == 1) std::rotate(v.begin(), v.begin() + 7, v.end());
  for (int i = 0; v.size() < 300; ++i) {
    v.push_back(static_cast<float>(std::sin(i * 0.37 + which) * (1 + i % 17)));
  }
  return v;
}

struct Case {
  std::string op;
  int inputs;  // tensors "self" and (for 2) "other"
  std::vector<std::pair<std::string, double>> numbers;
  std::function<double(double, double)> ref;
  double ulps;  // tolerance in units of the result's fp32 spacing
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.op;
}

bool close(float got, double want, double ulps) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == static_cast<float>(want);
  const double spacing =
      std::max(std::abs(std::nextafter(static_cast<float>(want), kInf) - static_cast<float>(want)),
               std::numeric_limits<float>::denorm_min());
  return std::abs(static_cast<double>(got) - want) <= ulps * spacing;
}

class ElementwiseRule : public ::testing::TestWithParam<Case> {};

TEST_P(ElementwiseRule, ProgramComputesTheCpuFormula) {
  const Case& c = GetParam();
  auto dev = testing::make_device();
  const std::vector<float> a = values(0), b = values(1);
  const int64_t n = static_cast<int64_t>(a.size());
  const uint64_t bytes = static_cast<uint64_t>(n) * 4;
  uint8_t* hbm = dev->hbm_data();
  std::memcpy(hbm, a.data(), bytes);
  std::memcpy(hbm + bytes, b.data(), bytes);
  FakeOpCall call(c.op, dev->params().core);
  call.arg("self", FakeOpCall::hbm(0, ScalarType::kFloat32, {n}, hbm));
  if (c.inputs > 1)
    call.arg("other", FakeOpCall::hbm(bytes, ScalarType::kFloat32, {n}, hbm + bytes));
  for (const auto& [name, v] : c.numbers) call.arg(name, v);
  call.out(FakeOpCall::hbm(2 * bytes, ScalarType::kFloat32, {n}, hbm + 2 * bytes));

  const kernels::ops::OpRule* rule = kernels::ops::find_op_rule(c.op);
  ASSERT_NE(rule, nullptr) << c.op << " has no rule";
  ASSERT_TRUE(rule->expr.build) << c.op << " is not an expression rule";
  ASSERT_TRUE(!rule->supports || rule->supports(call));
  for (const auto& p : rule->build(call)) dev->run(0, p);

  const auto* y = reinterpret_cast<const float*>(hbm + 2 * bytes);
  for (int64_t i = 0; i < n; ++i) {
    const double want = c.ref(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)]);
    EXPECT_TRUE(close(y[i], want, c.ulps))
        << c.op << "(" << a[static_cast<size_t>(i)] << ", " << b[static_cast<size_t>(i)]
        << ") = " << y[i] << ", expected " << want;
  }
}

// c10::div_floor_floating, in fp32 as the CPU kernel computes fp32 tensors.
double floor_div(double ad, double bd) {
  const float a = static_cast<float>(ad), b = static_cast<float>(bd);
  if (b == 0) return a / b;
  const float m = std::fmod(a, b);
  float d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return std::copysign(0.0f, a / b);
  float f = std::floor(d);
  if (d - f > 0.5f) f += 1.0f;
  return f;
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ElementwiseRule,
    ::testing::Values(
        // std::hypot: no overflow for magnitudes whose squares overflow, inf beats NaN.
        Case{"aten::hypot",
             2,
             {},
             [](double a, double b) {
               return std::hypot(static_cast<float>(a), static_cast<float>(b));
             },
             4},
        Case{"aten::add", 2, {{"alpha", 2.0}}, [](double a, double b) { return a + 2 * b; }, 1},
        Case{"aten::remainder",
             2,
             {},
             [](double ad, double bd) {
               const float a = static_cast<float>(ad), b = static_cast<float>(bd);
               const float r = std::fmod(a, b);
               return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
             },
             2},
        Case{"aten::floor_divide", 2, {}, floor_div, 2},
        Case{"aten::hardswish",
             1,
             {},
             [](double x, double) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; },
             2},
        Case{"aten::softplus",
             1,
             {{"beta", 2.0}, {"threshold", 10.0}},
             [](double x, double) { return 2 * x > 10 ? x : std::log1p(std::exp(2 * x)) / 2; },
             64}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.op.substr(6); });

}  // namespace
}  // namespace neuronsim
