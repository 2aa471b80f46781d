// Convolution tiling limits (kernels/convolution.h): ResNet's stem at ImageNet size and wider
// rows fit (bands of rows, then column tiles), a window that cannot fit is a clear error, and
// the stem's backward programs run on the device (timing mode), the weight gradient with its
// taps stacked on the partitions rather than one transpose, copy and matmul per tap.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "neuronsim/kernels/convolution.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using kernels::TensorDesc;

TensorDesc dense(DType t, const std::vector<int64_t>& sizes, uint64_t address = 0) {
  TensorDesc d{address, t, sizes, std::vector<int64_t>(sizes.size(), 1)};
  for (int64_t k = static_cast<int64_t>(sizes.size()) - 2; k >= 0; --k)
    d.strides[k] = d.strides[k + 1] * sizes[k + 1];
  return d;
}

kernels::ConvSpec stem_spec() {
  kernels::ConvSpec s;
  s.stride = {2, 2};
  s.padding = {3, 3};
  s.dilation = {1, 1};
  s.output_padding = {0, 0};
  return s;
}

TEST(ConvKernel, ResNetStemFitsAtImageNetSizesAndBeyond) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  for (DType dt : {DType::kFp32, DType::kBf16}) {
    for (const std::vector<int64_t>& x : std::vector<std::vector<int64_t>>{
             {4, 3, 224, 224}, {8, 3, 256, 256}, {2, 3, 512, 512}, {1, 3, 9, 4000}}) {
      const std::vector<int64_t> y{x[0], 64, (x[2] - 1) / 2 + 1, (x[3] - 1) / 2 + 1};
      EXPECT_TRUE(kernels::convolution_fits(x, {64, 3, 7, 7}, y, stem_spec(), dt, core))
          << x[2] << "x" << x[3] << " " << device_model::dtype_name(dt);
    }
  }
}

TEST(ConvKernel, StemBackwardAt224RunsInTimingMode) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  kernels::ConvBackwardIo io;
  const uint64_t mb = 1 << 20;
  io.input = dense(DType::kFp32, {4, 3, 224, 224}, 0);
  io.weight = dense(DType::kFp32, {64, 3, 7, 7}, 4 * mb);
  io.grad_out = dense(DType::kFp32, {4, 64, 112, 112}, 8 * mb);
  io.grad_weight = dense(DType::kFp32, {64, 3, 7, 7}, 24 * mb);
  io.grad_input = dense(DType::kFp32, {4, 3, 224, 224}, 28 * mb);
  const auto programs = kernels::build_convolution_backward("stem", io, stem_spec(), core);
  ASSERT_EQ(programs.size(), 2u);
  // Taps stacked 7 at a time: far fewer instructions than one transpose, evacuation and
  // matmul per tap for each of the 392 blocks of 128 positions (57624; 28945 measured).
  EXPECT_LT(programs[1].instruction_count(), 392u * 49 * 3);
  for (const auto& p : programs) dev->run(0, p);
}

TEST(ConvKernel, AWindowThatCannotFitSbufIsAClearError) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  kernels::ConvSpec s;
  const TensorDesc x = dense(DType::kFp32, {1, 1, 3, 300000});
  const TensorDesc w = dense(DType::kFp32, {1, 1, 3, 300000}, 8 << 20);
  const TensorDesc y = dense(DType::kFp32, {1, 1, 1, 1}, 16 << 20);
  EXPECT_FALSE(kernels::convolution_fits(x.sizes, w.sizes, y.sizes, s, DType::kFp32, core));
  try {
    kernels::build_convolution("huge", x, w, std::nullopt, y, s, core);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit SBUF"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("huge"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace neuronsim
