// End to end: the library GEMM and layernorm compute the right values on the simulated core.
#include <gtest/gtest.h>

#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

TEST(DeviceSmoke, GemmWithBiasAndGeluMatchesHostReference) {
  auto dev = testing::make_device();
  kernels::GemmSpec s;
  s.m = 200, s.k = 300, s.n = 700;  // partial tiles on every axis
  s.bias = true;
  s.epilogue = device_model::ActFunc::kGelu;
  kernels::GemmAddresses a{0, 1 << 20, 2 << 20, 3 << 20};
  reference::fill_normal(dev->hbm_data() + a.a_t, s.in_dtype, uint64_t{s.k} * s.m, 1);
  reference::fill_normal(dev->hbm_data() + a.b, s.in_dtype, uint64_t{s.k} * s.n, 2, 0.1f);
  reference::fill_normal(dev->hbm_data() + a.bias, s.in_dtype, s.n, 3);
  dev->run(0, kernels::build_gemm(s, a, dev->params().core));
  const auto out = reference::read_floats(dev->hbm_data() + a.c, s.out_dtype, uint64_t{s.m} * s.n);
  const auto cmp = reference::compare(out, reference::gemm(s, dev->hbm_data(), a), 2e-2, 2e-2);
  EXPECT_EQ(cmp.mismatches, 0u) << "max abs error " << cmp.max_abs_error;
}

TEST(DeviceSmoke, LayerNormMatchesHostReference) {
  auto dev = testing::make_device();
  kernels::LayerNormSpec s;
  s.rows = 300, s.dim = 96, s.dtype = device_model::DType::kFp32;
  kernels::LayerNormAddresses a{0, 1 << 20, 2 << 20, 3 << 20};
  reference::fill_normal(dev->hbm_data() + a.x, s.dtype, uint64_t{s.rows} * s.dim, 4);
  reference::fill_normal(dev->hbm_data() + a.gamma, s.dtype, s.dim, 5);
  reference::fill_normal(dev->hbm_data() + a.beta, s.dtype, s.dim, 6);
  dev->run(0, kernels::build_layernorm(s, a, dev->params().core));
  const auto out = reference::read_floats(dev->hbm_data() + a.y, s.dtype, uint64_t{s.rows} * s.dim);
  const auto cmp = reference::compare(out, reference::layernorm(s, dev->hbm_data(), a), 1e-4, 1e-4);
  EXPECT_EQ(cmp.mismatches, 0u) << "max abs error " << cmp.max_abs_error;
}

TEST(DeviceSmoke, SimulatedClockIsMonotonicAcrossRuns) {
  auto dev = testing::make_device();
  kernels::LayerNormSpec s{128, 64, device_model::DType::kFp32, 1e-5f};
  kernels::LayerNormAddresses a{0, 1 << 20, 2 << 20, 3 << 20};
  const auto p = kernels::build_layernorm(s, a, dev->params().core);
  const auto r1 = dev->run(0, p);
  const auto r2 = dev->run(0, p);
  EXPECT_GT(r1.duration().ps, 0u);
  EXPECT_EQ(r2.start, r1.end);
  EXPECT_EQ(r2.duration(), r1.duration());  // same program, same state: same time
}

}  // namespace
}  // namespace neuronsim
