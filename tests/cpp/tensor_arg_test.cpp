// TensorArg (kernels/ops/op_call.h), torch-free: contiguity as the framework states it, in
// framework elements (64-bit data is described in 32-bit words, strides doubled) and always for
// empty tensors: rules that take contiguous inputs (roll without dims, unique) read it.
#include <gtest/gtest.h>

#include <vector>

#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim {
namespace {

using kernels::ops::ScalarType;
using kernels::ops::TensorArg;

TensorArg arg(ScalarType type, std::vector<int64_t> sizes, std::vector<int64_t> device_strides) {
  TensorArg t;
  t.defined = true;
  t.on_device = true;
  t.type = type;
  t.desc.sizes = std::move(sizes);
  t.desc.strides = std::move(device_strides);
  return t;
}

TEST(TensorArg, SixtyFourBitDataIsContiguousInFrameworkElements) {
  EXPECT_TRUE(arg(ScalarType::kInt64, {5, 10}, {20, 2}).is_contiguous());
  EXPECT_EQ(arg(ScalarType::kInt64, {5, 10}, {20, 2}).stride(0), 10);
  EXPECT_FALSE(arg(ScalarType::kInt64, {5, 10}, {2, 10}).is_contiguous());  // transposed
  EXPECT_TRUE(arg(ScalarType::kFloat32, {5, 10}, {10, 1}).is_contiguous());
  EXPECT_FALSE(arg(ScalarType::kFloat32, {5, 10}, {20, 2}).is_contiguous());
}

TEST(TensorArg, EmptyAndSizeOneDimsAreContiguous) {
  EXPECT_TRUE(arg(ScalarType::kFloat32, {0, 0, 0}, {1, 1, 1}).is_contiguous());
  EXPECT_TRUE(arg(ScalarType::kInt32, {3, 0}, {7, 5}).is_contiguous());
  EXPECT_TRUE(arg(ScalarType::kFloat32, {1, 4}, {99, 1}).is_contiguous());
}

}  // namespace
}  // namespace neuronsim
