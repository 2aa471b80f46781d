// Group norm on channels-last data ([N, HxW, C] in memory, what convolutions hand back): the
// forward and backward programs in full mode against a double-precision host reference, with the
// input, output and gradients each contiguous or channels-last: positions on partitions (both
// channels-last forward), rows (n, g) held in SBUF whole or streamed in chunks of positions.
// Contiguous tensors in the same programs give the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "neuronsim/kernels/group_norm.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using kernels::GroupNormShape;
using kernels::TensorDesc;

device_model::Device& shared_device() {
  static const std::unique_ptr<device_model::Device> dev = testing::make_device();
  return *dev;
}

struct Case {
  int64_t N, C, H, W, G;
};

// [N, C, H, W] data, contiguous or channels-last.
TensorDesc data(const Case& c, uint64_t address, bool channels_last) {
  const std::vector<int64_t> strides =
      channels_last ? std::vector<int64_t>{c.H * c.W * c.C, 1, c.W * c.C, c.C}
                    : std::vector<int64_t>{c.C * c.H * c.W, c.H * c.W, c.W, 1};
  return {address, DType::kFp32, {c.N, c.C, c.H, c.W}, strides};
}

// Element offset of (n, ch, s) (s: the flattened spatial position).
int64_t at(const TensorDesc& t, int64_t n, int64_t ch, int64_t s) {
  const int64_t W = t.sizes[3];
  return n * t.strides[0] + ch * t.strides[1] + (s / W) * t.strides[2] + (s % W) * t.strides[3];
}

// Regions 1 MiB apart: data tensors, [N, G] statistics and [C] parameters.
constexpr uint64_t kRegion = 1 << 20;

void write(uint8_t* hbm, uint64_t address, const std::vector<float>& v) {
  std::memcpy(hbm + address, v.data(), v.size() * sizeof(float));
}

std::vector<float> read(const uint8_t* hbm, uint64_t address, uint64_t count) {
  return reference::read_floats(hbm + address, DType::kFp32, count);
}

// Logical [N, C, HxW] values of a data tensor.
std::vector<double> logical(const uint8_t* hbm, const TensorDesc& t, const Case& c) {
  const int64_t HW = c.H * c.W;
  const std::vector<float> raw = read(hbm, t.address, t.numel());
  std::vector<double> out(static_cast<size_t>(c.N * c.C * HW));
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t s = 0; s < HW; ++s) out[(n * c.C + ch) * HW + s] = raw[at(t, n, ch, s)];
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& ref, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  uint64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!(std::abs(got[i] - ref[i]) <= tol * (1.0 + std::abs(ref[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: device " << got[i] << ", reference " << ref[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

// Per (n, g): mean and rstd of the logical values x.
void statistics(const Case& c, const std::vector<double>& x, double eps, std::vector<double>& mean,
                std::vector<double>& rstd) {
  const int64_t Cg = c.C / c.G, HW = c.H * c.W, D = Cg * HW;
  mean.assign(static_cast<size_t>(c.N * c.G), 0.0);
  rstd.assign(mean.size(), 0.0);
  for (int64_t r = 0; r < c.N * c.G; ++r) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < D; ++i) s += x[r * D + i];
    const double m = s / static_cast<double>(D);
    for (int64_t i = 0; i < D; ++i) ss += (x[r * D + i] - m) * (x[r * D + i] - m);
    mean[r] = m;
    rstd[r] = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
  }
}

std::vector<float> ramp(int64_t n, float base, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = base + step * static_cast<float>(i % 7);
  return v;
}

// Runs the forward with the input and output layouts given; checks y, mean and rstd and returns
// the simulated time in seconds.
double run_forward(const Case& c, bool in_cl, bool out_cl) {
  SCOPED_TRACE(::testing::Message() << "N=" << c.N << " C=" << c.C << " H=" << c.H << " W=" << c.W
                                    << " G=" << c.G << " in_cl=" << in_cl << " out_cl=" << out_cl);
  device_model::Device& dev = shared_device();
  uint8_t* hbm = dev.hbm_data();
  const int64_t HW = c.H * c.W, Cg = c.C / c.G;
  kernels::GroupNormIo io;
  io.in = data(c, 0, in_cl);
  io.out = data(c, kRegion, out_cl);
  io.mean = TensorDesc{2 * kRegion, DType::kFp32, {c.N, c.G}, {c.G, 1}};
  io.rstd = TensorDesc{3 * kRegion, DType::kFp32, {c.N, c.G}, {c.G, 1}};
  io.weight = TensorDesc{4 * kRegion, DType::kFp32, {c.C}, {1}};
  io.bias = TensorDesc{5 * kRegion, DType::kFp32, {c.C}, {1}};
  io.shape = GroupNormShape{c.N, c.C, HW, c.G};
  io.eps = 1e-5f;
  reference::fill_normal(hbm, DType::kFp32, io.in.numel(), 11, 2.0f);
  const std::vector<float> w = ramp(c.C, 0.5f, 0.25f), b = ramp(c.C, -1.0f, 0.375f);
  write(hbm, io.weight->address, w);
  write(hbm, io.bias->address, b);
  const double seconds =
      dev.run(0, kernels::build_group_norm("group_norm", io, dev.params().core)).duration().ps *
      1e-12;

  const std::vector<double> x = logical(hbm, io.in, c);
  std::vector<double> mean, rstd;
  statistics(c, x, io.eps, mean, rstd);
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ch = 0; ch < c.C; ++ch) {
      const int64_t r = n * c.G + ch / Cg;
      for (int64_t s = 0; s < HW; ++s) {
        const int64_t i = (n * c.C + ch) * HW + s;
        y[i] = (x[i] - mean[r]) * rstd[r] * w[ch] + b[ch];
      }
    }
  expect_close(logical(hbm, io.out, c), y, 1e-4, "y");
  const std::vector<float> m = read(hbm, io.mean->address, c.N * c.G),
                           rs = read(hbm, io.rstd->address, c.N * c.G);
  expect_close({m.begin(), m.end()}, mean, 1e-4, "mean");
  expect_close({rs.begin(), rs.end()}, rstd, 1e-4, "rstd");
  return seconds;
}

// Runs the backward with the layouts given; checks grad_input, grad_weight and grad_bias.
void run_backward(const Case& c, bool in_cl, bool grad_out_cl, bool grad_in_cl) {
  SCOPED_TRACE(::testing::Message() << "N=" << c.N << " C=" << c.C << " H=" << c.H << " W=" << c.W
                                    << " G=" << c.G << " in_cl=" << in_cl << " grad_out_cl="
                                    << grad_out_cl << " grad_in_cl=" << grad_in_cl);
  device_model::Device& dev = shared_device();
  uint8_t* hbm = dev.hbm_data();
  const int64_t HW = c.H * c.W, Cg = c.C / c.G, D = Cg * HW;
  kernels::GroupNormBackwardIo io;
  io.in = data(c, 0, in_cl);
  io.grad_out = data(c, kRegion, grad_out_cl);
  io.grad_in = data(c, 2 * kRegion, grad_in_cl);
  io.mean = TensorDesc{3 * kRegion, DType::kFp32, {c.N, c.G}, {c.G, 1}};
  io.rstd = TensorDesc{4 * kRegion, DType::kFp32, {c.N, c.G}, {c.G, 1}};
  io.weight = TensorDesc{5 * kRegion, DType::kFp32, {c.C}, {1}};
  io.grad_weight = TensorDesc{6 * kRegion, DType::kFp32, {c.C}, {1}};
  io.grad_bias = TensorDesc{7 * kRegion, DType::kFp32, {c.C}, {1}};
  io.shape = GroupNormShape{c.N, c.C, HW, c.G};
  reference::fill_normal(hbm, DType::kFp32, io.in.numel(), 12, 1.5f);
  reference::fill_normal(hbm + kRegion, DType::kFp32, io.grad_out.numel(), 13);
  const std::vector<double> x = logical(hbm, io.in, c), dy = logical(hbm, io.grad_out, c);
  std::vector<double> mean, rstd;
  statistics(c, x, 1e-5, mean, rstd);
  write(hbm, io.mean.address, {mean.begin(), mean.end()});
  write(hbm, io.rstd.address, {rstd.begin(), rstd.end()});
  const std::vector<float> w = ramp(c.C, 0.5f, 0.25f);
  write(hbm, io.weight->address, w);
  dev.run(0, kernels::build_group_norm_backward("group_norm_backward", io, dev.params().core));

  // dx = rstd * (dy w - mean_g(dy w) - xhat * mean_g(dy w xhat)); dw = sum dy xhat; db = sum dy
  // (the row's statistics as the device read them: fp32).
  std::vector<double> dx(x.size()), dw(static_cast<size_t>(c.C), 0.0), db(dw.size(), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t g = 0; g < c.G; ++g) {
      const int64_t r = n * c.G + g;
      const double m = static_cast<float>(mean[r]), rs = static_cast<float>(rstd[r]);
      double a = 0, bsum = 0;
      for (int64_t j = 0; j < Cg; ++j)
        for (int64_t s = 0; s < HW; ++s) {
          const int64_t ch = g * Cg + j, i = (n * c.C + ch) * HW + s;
          a += dy[i] * w[ch];
          bsum += dy[i] * w[ch] * (x[i] - m) * rs;
        }
      a /= static_cast<double>(D);
      bsum /= static_cast<double>(D);
      for (int64_t j = 0; j < Cg; ++j)
        for (int64_t s = 0; s < HW; ++s) {
          const int64_t ch = g * Cg + j, i = (n * c.C + ch) * HW + s;
          const double xhat = (x[i] - m) * rs;
          dx[i] = rs * (dy[i] * w[ch] - a - xhat * bsum);
          dw[ch] += dy[i] * xhat;
          db[ch] += dy[i];
        }
    }
  expect_close(logical(hbm, *io.grad_in, c), dx, 2e-4, "grad_input");
  const std::vector<float> gw = read(hbm, io.grad_weight->address, c.C),
                           gb = read(hbm, io.grad_bias->address, c.C);
  expect_close({gw.begin(), gw.end()}, dw, 2e-4, "grad_weight");
  expect_close({gb.begin(), gb.end()}, db, 2e-4, "grad_bias");
}

TEST(GroupNormKernel, ChannelsLastLayoutIsRecognised) {
  using kernels::group_norm_channels_last;
  EXPECT_TRUE(group_norm_channels_last({2, 8, 4, 5}, {160, 1, 40, 8}));
  EXPECT_FALSE(group_norm_channels_last({2, 8, 4, 5}, {160, 20, 5, 1}));         // contiguous
  EXPECT_TRUE(group_norm_channels_last({2, 8, 3, 4, 5}, {480, 1, 160, 40, 8}));  // 3-d maps
  EXPECT_TRUE(group_norm_channels_last({2, 8, 7}, {56, 1, 8}));                  // 1-d maps
  EXPECT_TRUE(group_norm_channels_last({1, 8, 4, 5}, {7, 1, 40, 8}));      // size-1 dim: any stride
  EXPECT_FALSE(group_norm_channels_last({2, 8, 4, 5}, {320, 1, 80, 16}));  // gaps: not dense
  EXPECT_FALSE(group_norm_channels_last({2, 8, 4, 5}, {160, 1, 8, 32}));   // W outer of H
  EXPECT_FALSE(group_norm_channels_last({8, 20}, {1, 8}));                 // no spatial dim
}

TEST(GroupNormKernel, ChannelsLastForwardMatchesReference) {
  for (const Case& c :
       {Case{2, 8, 4, 4, 2}, Case{2, 32, 8, 8, 4}, Case{2, 32, 8, 8, 8}, Case{3, 6, 5, 5, 3}}) {
    run_forward(c, true, true);
  }
  // 32 position tiles of 6 channels; 1,280 channels broadcast 512 columns at a time over 140
  // positions (a partial second tile).
  run_forward({2, 6, 64, 64, 2}, true, true);
  run_forward({1, 1280, 10, 14, 32}, true, true);
  // Rows of 3 x 4096 elements with one tensor contiguous: streamed in chunks of whole positions.
  run_forward({2, 6, 64, 64, 2}, true, false);
  // Each tensor in its own layout.
  run_forward({2, 32, 8, 8, 4}, true, false);
  run_forward({2, 32, 8, 8, 4}, false, true);
  run_forward({2, 32, 8, 8, 4}, false, false);
}

TEST(GroupNormKernel, ChannelsLastBackwardMatchesReference) {
  run_backward({2, 8, 4, 4, 2}, true, true, true);
  run_backward({2, 32, 8, 8, 8}, true, true, true);
  run_backward({2, 6, 64, 64, 2}, true, true, true);
  // A contiguous gradient of a channels-last input, and the reverse.
  run_backward({2, 32, 8, 8, 4}, true, false, true);
  run_backward({2, 32, 8, 8, 4}, true, false, false);
  run_backward({2, 32, 8, 8, 4}, false, true, false);
  run_backward({2, 32, 8, 8, 4}, false, false, false);
}

// Channels-last in and out: positions on partitions, each position's 64 channels one 256-byte
// run, so the image moves in one DMA per 128 positions and the forward stays within 2x of the
// contiguous one (both move the same 256 KiB; the channels-last kernel adds TensorE sums and
// broadcasts). Rows of (n, g) would move runs of C/G = 2 channels, a descriptor (26.4 ns,
// dma.descriptor_overhead_ns) per 8 bytes: 65,536 of them per direction.
TEST(CostModelRules, ChannelsLastGroupNormMovesWholePositions) {
  const Case c{2, 64, 32, 32, 32};
  const double contiguous = run_forward(c, false, false);
  const double channels_last = run_forward(c, true, true);
  EXPECT_LT(channels_last, 2.0 * contiguous) << channels_last << " s vs " << contiguous << " s";
}

TEST(GroupNormKernel, StridedDataIsRejectedWithItsName) {
  const Case c{2, 8, 4, 4, 2};
  kernels::GroupNormIo io;
  io.in = data(c, 0, true);
  io.in.strides = {256, 2, 64, 16};  // every other channel: neither layout
  io.out = data(c, kRegion, false);
  io.shape = GroupNormShape{c.N, c.C, c.H * c.W, c.G};
  try {
    kernels::build_group_norm("group_norm", io, shared_device().params().core);
    FAIL() << "accepted a strided input";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("input"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("channels-last"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace neuronsim
