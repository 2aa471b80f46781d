// MatmulSpec::scales (torch._scaled_mm's tensor-wise scale_a, scale_b): one-element fp32 tensors
// in device memory that the program loads onto every partition and multiplies into the product
// in the epilogue, with or without a bias, in the row-stationary and the weight-stationary
// (transposed output) kernels. Bad scales are a clear error. (FP8 operands and their double-row
// time: tests/python/test_scaled_mm.py, CostModelRules.Fp8DoubleRowGemm*.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "neuronsim/kernels/matmul.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using kernels::TensorDesc;

constexpr uint64_t kMiB = 1 << 20;

TEST(ScaledMatmul, ScalesFromDeviceMemoryMultiplyTheProduct) {
  auto dev = testing::make_device("trn2");
  uint8_t* hbm = dev->hbm_data();
  const auto& core = dev->params().core;
  const float sa = 0.37f, sb = 1.9f;
  std::memcpy(hbm + 60 * kMiB, &sa, 4);
  std::memcpy(hbm + 60 * kMiB + 64, &sb, 4);
  kernels::MatmulSpec spec;
  spec.scales = {TensorDesc{60 * kMiB, DType::kFp32, {}, {}},
                 TensorDesc{60 * kMiB + 64, DType::kFp32, {1}, {1}}};
  // M = 200 (row-stationary) and M = 16 with N = 640 (weight-stationary, transposed output).
  for (int64_t m : {200, 16}) {
    SCOPED_TRACE(m);
    const int64_t k = 300, n = 640;
    reference::fill_normal(hbm, DType::kFp32, m * k, 1);
    reference::fill_normal(hbm + 4 * kMiB, DType::kFp32, k * n, 2);
    reference::fill_normal(hbm + 8 * kMiB, DType::kFp32, n, 3);
    const TensorDesc a{0, DType::kFp32, {m, k}, {k, 1}};
    const TensorDesc b{4 * kMiB, DType::kFp32, {k, n}, {n, 1}};
    const TensorDesc bias{8 * kMiB, DType::kFp32, {n}, {1}};
    const TensorDesc c{16 * kMiB, DType::kFp32, {m, n}, {n, 1}};
    for (bool with_bias : {false, true}) {
      dev->run(0,
               kernels::build_matmul("scaled_mm", a, b, c,
                                     with_bias ? std::optional(bias) : std::nullopt, spec, core));
      const auto av = reference::read_floats(hbm, DType::kFp32, m * k);
      const auto bv = reference::read_floats(hbm + 4 * kMiB, DType::kFp32, k * n);
      const auto biasv = reference::read_floats(hbm + 8 * kMiB, DType::kFp32, n);
      const auto got = reference::read_floats(hbm + 16 * kMiB, DType::kFp32, m * n);
      for (int64_t i = 0; i < m; i += 7) {
        for (int64_t j = 0; j < n; j += 13) {
          double ref = 0;
          for (int64_t x = 0; x < k; ++x) ref += double(av[i * k + x]) * bv[x * n + j];
          ref = ref * sa * sb + (with_bias ? biasv[j] : 0.0);
          ASSERT_NEAR(got[i * n + j], ref, 1e-4 * (1 + std::fabs(ref))) << i << "," << j;
        }
      }
    }
  }
  // A scale of more than one value is an error naming it (row-wise scales are not taken here).
  kernels::MatmulSpec bad;
  bad.scales = {TensorDesc{60 * kMiB, DType::kFp32, {4}, {1}}};
  const TensorDesc a{0, DType::kFp32, {8, 8}, {8, 1}}, c{kMiB, DType::kFp32, {8, 8}, {8, 1}};
  try {
    kernels::build_matmul("scaled_mm", a, a, c, std::nullopt, bad, core);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("scale 0 must hold one value"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace neuronsim
