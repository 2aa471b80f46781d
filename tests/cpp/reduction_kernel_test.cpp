// max/min/prod over outer dims (x.amax(0) of a row-major matrix, a middle dim of a 3-d tensor):
// the library reduction moves runs of contiguous kept columns, not one element per descriptor.
// Full mode against a host reference over the same inputs, and a simulated time well below the
// per-element path's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "neuronsim/kernels/reduction.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device::DType;
using device::ReduceOp;
using kernels::TensorDesc;

std::vector<int64_t> row_major(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d > 0; --d) s[d - 1] = s[d] * sizes[d];
  return s;
}

struct Case {
  std::vector<int64_t> sizes;
  int64_t dim;  // the reduced dim (not the innermost)
  ReduceOp op;
};

// Runs the reduction on [outer, r, inner] (sizes collapsed around `dim`), checks every output
// element and returns the simulated time in seconds.
double run_case(device::Device& dev, const Case& c) {
  TensorDesc in{0, DType::kFp32, c.sizes, row_major(c.sizes)};
  std::vector<int64_t> out_sizes = c.sizes;
  out_sizes.erase(out_sizes.begin() + c.dim);
  const uint64_t n = in.numel();
  TensorDesc out{(n * 4 + 4095) / 4096 * 4096, DType::kFp32, out_sizes, row_major(out_sizes)};
  uint8_t* hbm = dev.hbm_data();
  reference::fill_normal(hbm, DType::kFp32, n, 7);
  kernels::ReduceSpec spec;
  spec.dims = {c.dim};
  spec.op = c.op;
  const double s =
      dev.run(0, kernels::build_reduce("reduce", in, out, spec, dev.params().core)).duration().ps *
      1e-12;
  const std::vector<float> x = reference::read_floats(hbm, DType::kFp32, n);
  const std::vector<float> got =
      reference::read_floats(hbm + out.address, DType::kFp32, out.numel());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < c.dim; ++d) outer *= c.sizes[d];
  for (size_t d = c.dim + 1; d < c.sizes.size(); ++d) inner *= c.sizes[d];
  const int64_t r = c.sizes[c.dim];
  uint64_t bad = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double ref = x[o * r * inner + j];
      for (int64_t i = 1; i < r; ++i) {
        const double v = x[(o * r + i) * inner + j];
        ref = c.op == ReduceOp::kMax   ? std::max(ref, v)
              : c.op == ReduceOp::kMin ? std::min(ref, v)
                                       : ref * v;
      }
      const double g = got[o * inner + j];
      if (std::abs(g - ref) > 1e-5 * std::abs(ref) + 1e-30 && bad++ < 5) {
        ADD_FAILURE() << "out[" << o << ", " << j << "]: device " << g << ", reference " << ref;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
  return s;
}

TEST(ReductionKernel, MaxMinProdOverOuterDimsMatchReferenceWithoutGathers) {
  auto dev = testing::make_device();
  // 1100 columns: 122 partitions of 9 columns and a 2-column tail on one partition.
  const auto& dma = dev->params().core.dma;
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    SCOPED_TRACE(static_cast<int>(op));
    const double s = run_case(*dev, {{300, 1100}, 0, op});
    // A descriptor per element (330 k of them over the 16 engines) would spend this long on
    // packet overhead alone; runs of 9 columns per partition row cost 9x fewer packets.
    const double per_element_s = 300.0 * 1100 / dma.engines * dma.descriptor_overhead_ns * 1e-9;
    EXPECT_LT(s * 4, per_element_s);
  }
  run_case(*dev, {{20, 1100}, 0, ReduceOp::kMultiply});
  // A middle dim: the outer kept dim iterates, 33 columns on 33 partitions.
  run_case(*dev, {{7, 200, 33}, 1, ReduceOp::kMax});
  run_case(*dev, {{3, 16, 257}, 1, ReduceOp::kMultiply});
}

}  // namespace
}  // namespace neuronsim
