// trn2 LNC=2 for the row kernels (reductions, softmax and its backward, layer norm): the rows
// split across the two physical cores of the logical core (kernels/spmd.h), each core running
// the single-core kernel on its half, so the values are the one-core program's exactly and the
// time about halves (HARDWARE.md 1.10: the pair shares one HBM stack, so memory-bound kernels
// gain less than the 2x of a compute-bound GEMM).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "neuronsim/kernels/spmd.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using device_model::Program;
using kernels::TensorDesc;

device_model::Device& trn2() {
  static const std::unique_ptr<device_model::Device> dev =
      testing::make_device("trn2", {}, device_model::ExecMode::kFull, 2);
  return *dev;
}

constexpr uint64_t kMiB = 1 << 20;
constexpr int64_t kRows = 2048, kCols = 1024;  // 8 MiB of fp32

// Runs the one-core and the two-core program (outputs at out1 and out2, `bytes` each), checks
// the two-core one is a grid launch with work on both cores and bit-identical outputs, and
// returns the two durations' ratio.
double split_ratio(const Program& one, const Program& two, uint64_t out1, uint64_t out2,
                   uint64_t bytes) {
  auto& dev = trn2();
  EXPECT_EQ(one.grid, 1u);
  EXPECT_EQ(two.grid, 2u);
  EXPECT_GT(two.instruction_count(1), 0u);
  const double t1 = dev.run(0, one).duration().seconds();
  const double t2 = dev.run(0, two).duration().seconds();
  std::printf("%s: one core %.1f us, two %.1f us (%.2fx)\n", one.name.c_str(), t1 * 1e6, t2 * 1e6,
              t2 / t1);
  EXPECT_EQ(std::memcmp(dev.hbm_data() + out1, dev.hbm_data() + out2, bytes), 0);
  return t2 / t1;
}

TEST(LncRows, ReductionsSoftmaxAndLayerNormSplitRowsAcrossBothCores) {
  auto& dev = trn2();
  const auto& core = dev.params().core;
  reference::fill_normal(dev.hbm_data(), DType::kFp32, kRows * kCols * 2, 3);
  const TensorDesc x{0, DType::kFp32, {kRows, kCols}, {kCols, 1}};
  const TensorDesc g{8 * kMiB, DType::kFp32, {kRows, kCols}, {kCols, 1}};
  // Row sums (innermost dim), column maxima (outer dim) and a row variance.
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    kernels::ReduceSpec spec;
    spec.dims = {which == 1 ? 0 : 1};
    spec.op = which == 1 ? device_model::ReduceOp::kMax : device_model::ReduceOp::kAdd;
    spec.variance = which == 2;
    const int64_t n = which == 1 ? kCols : kRows;
    const TensorDesc o1{16 * kMiB, DType::kFp32, {n}, {1}};
    TensorDesc o2 = o1;
    o2.address = 17 * kMiB;
    const double r = split_ratio(kernels::build_reduce_grid("reduce", x, o1, spec, core, 1),
                                 kernels::build_reduce_grid("reduce", x, o2, spec, core, 2),
                                 o1.address, o2.address, uint64_t(n) * 4);
    // The column maxima stream 8 MiB through one stack: two cores' DMA pools (2 x 16 x 27.2
    // GB/s, dma.engine_bandwidth_gbps) share its 725 GB/s (trn2 hbm.bandwidth_gbps), so at
    // best 0.6x; the row kernels are engine-bound and near 0.5x.
    EXPECT_LT(r, which == 1 ? 0.7 : 0.6);
  }
  // softmax over rows, its backward, layer norm with statistics.
  const TensorDesc y1{24 * kMiB, DType::kFp32, {kRows, kCols}, {kCols, 1}};
  TensorDesc y2 = y1;
  y2.address = 32 * kMiB;
  const uint64_t bytes = uint64_t(kRows) * kCols * 4;
  EXPECT_LT(split_ratio(kernels::build_softmax_grid("softmax", x, y1, 1, false, core, 1),
                        kernels::build_softmax_grid("softmax", x, y2, 1, false, core, 2),
                        y1.address, y2.address, bytes),
            0.6);
  EXPECT_LT(
      split_ratio(kernels::build_softmax_backward_grid("softmax_bw", g, y1, y2, 1, false, core, 1),
                  kernels::build_softmax_backward_grid("softmax_bw", g, y1, x, 1, false, core, 2),
                  y2.address, x.address, bytes),
      0.6);
  kernels::LayerNormIo io;
  io.in = g;
  io.out = y1;
  io.mean = TensorDesc{40 * kMiB, DType::kFp32, {kRows, 1}, {1, 1}};
  io.rstd = TensorDesc{41 * kMiB, DType::kFp32, {kRows, 1}, {1, 1}};
  kernels::LayerNormIo io2 = io;
  io2.out = y2;
  io2.mean->address = 42 * kMiB;
  io2.rstd->address = 43 * kMiB;
  EXPECT_LT(split_ratio(kernels::build_layer_norm_grid("layer_norm", io, core, 1),
                        kernels::build_layer_norm_grid("layer_norm", io2, core, 2), y1.address,
                        y2.address, bytes),
            0.6);
  EXPECT_EQ(std::memcmp(dev.hbm_data() + 40 * kMiB, dev.hbm_data() + 42 * kMiB, kRows * 4), 0);
  // Too little work for two cores: one.
  const TensorDesc small{0, DType::kFp32, {64, 64}, {64, 1}};
  EXPECT_EQ(kernels::build_softmax_grid("softmax", small, small, 1, false, core, 2).grid, 1u);
}

}  // namespace
}  // namespace neuronsim
