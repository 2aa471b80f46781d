// Elementwise programs whose steps have constant operands: they validate and compute the folded
// value (an activation of a constant once emitted a ScalarE memset, which the validator rejects).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "neuronsim/kernels/elementwise.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using kernels::Arg;
using kernels::TensorDesc;

constexpr int64_t kRows = 130, kCols = 7;  // more rows than partitions: two tiles
constexpr uint64_t kBytes = kRows * kCols * 4;

TensorDesc matrix(uint64_t address) {
  return TensorDesc{address, device_model::DType::kFp32, {kRows, kCols}, {kCols, 1}};
}

TEST(ElementwiseKernel, ActivationOfAConstantRunsAndFolds) {
  auto dev = testing::make_device();
  auto* x = reinterpret_cast<float*>(dev->hbm_data());
  for (int64_t i = 0; i < kRows * kCols; ++i) x[i] = static_cast<float>(i % 5);

  // y = x + tanh(0.5 * 2 + 0.25)
  kernels::Expr e;
  const Arg c = e.act(device_model::ActFunc::kTanh, Arg::constant(0.5f), 2.0f, 0.25f);
  e.alu(device_model::AluOp::kAdd, Arg::input(0), c);
  const device_model::Program p =
      kernels::build_elementwise("act_const", {matrix(0)}, matrix(kBytes), e, dev->params().core);
  dev->run(0, p);  // validates: every memset is on VectorE or GpSimdE

  const auto* y = reinterpret_cast<const float*>(dev->hbm_data() + kBytes);
  for (int64_t i = 0; i < kRows * kCols; ++i)
    ASSERT_NEAR(y[i], static_cast<float>(i % 5) + std::tanh(1.25f), 1e-6f) << i;
}

}  // namespace
}  // namespace neuronsim
