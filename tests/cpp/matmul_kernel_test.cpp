// The library matmul computes C = epilogue(alpha * A @ B + beta * bias) for every operand layout
// it plans differently: K-major and natural (transposed on TensorE) operands, element gathers,
// batches with broadcast operands, partial tiles, K == 0, a bias per row or broadcast, and SBUF
// too small to keep an operand resident (chunks re-streamed). Full mode against a double
// reference over the same rounded inputs.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/ranges.h>

#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/scalesim_gemm.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::ActFunc;
using device_model::DType;
using kernels::TensorDesc;

// Row-major strides for `sizes`, then `perm` reorders which dim is innermost: the tensor is laid
// out as the permuted shape, contiguous, and viewed back.
std::vector<int64_t> strides_for(const std::vector<int64_t>& sizes, const std::vector<int>& order) {
  // order: dims from outermost to innermost in memory.
  std::vector<int64_t> s(sizes.size());
  int64_t step = 1;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    s[order[i]] = step;
    step *= sizes[order[i]];
  }
  return s;
}

struct Case {
  std::vector<int64_t> a_sizes, b_sizes, c_sizes;
  std::vector<int> a_order, b_order;  // memory order of the dims (outer to inner)
  DType dt = DType::kFp32;
  bool bias = false, bias_rows = false;
  float alpha = 1, beta = 1;
  ActFunc f = ActFunc::kCopy;
  int64_t a_elem_step = 1;      // > 1: A's elements sit this far apart (a gather)
  std::optional<DType> out_dt;  // C's dtype when not dt
};

uint64_t span_elems(const TensorDesc& t) {
  uint64_t hi = 1;
  for (size_t d = 0; d < t.sizes.size(); ++d) hi += (t.sizes[d] - 1) * t.strides[d];
  return hi;
}

// A tensor's elements as read from HBM, indexed by (right-aligned, broadcast) coordinates.
struct HostView {
  TensorDesc t;
  std::vector<float> data;
  HostView(const uint8_t* hbm, const TensorDesc& d)
      : t(d), data(reference::read_floats(hbm + d.address, d.dtype, span_elems(d))) {}
  double at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    const size_t k = idx.size() - t.sizes.size();
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      off += (t.sizes[d] == 1 ? 0 : idx[k + d]) * t.strides[d];
    }
    return data[off];
  }
};

// Runs the case and checks C; returns how many double-row matmuls the program issued.
size_t run_case(device_model::Device& dev, const Case& c) {
  uint8_t* hbm = dev.hbm_data();
  uint64_t next = 0;
  auto place = [&](TensorDesc& t, uint64_t seed) {
    t.address = next;
    const uint64_t n = span_elems(t);
    reference::fill_normal(hbm + next, t.dtype, n, seed);
    next += (n * device_model::dtype_size(t.dtype) + 4095) / 4096 * 4096;
  };
  TensorDesc a{0, c.dt, c.a_sizes, strides_for(c.a_sizes, c.a_order)};
  for (auto& s : a.strides) s *= c.a_elem_step;
  TensorDesc b{0, c.dt, c.b_sizes, strides_for(c.b_sizes, c.b_order)};
  std::vector<int> c_order(c.c_sizes.size());
  for (size_t i = 0; i < c_order.size(); ++i) c_order[i] = static_cast<int>(i);
  TensorDesc out{0, c.out_dt.value_or(c.dt), c.c_sizes, strides_for(c.c_sizes, c_order)};
  std::optional<TensorDesc> bias;
  place(a, 1);
  place(b, 2);
  place(out, 3);
  const int64_t M = c.c_sizes[c.c_sizes.size() - 2], N = c.c_sizes.back();
  if (c.bias) {
    std::vector<int64_t> bs = c.bias_rows ? std::vector<int64_t>{M, N} : std::vector<int64_t>{N};
    bias = TensorDesc{0, c.dt, bs,
                      strides_for(bs, c.bias_rows ? std::vector<int>{0, 1} : std::vector<int>{0})};
    place(*bias, 4);
  }
  kernels::MatmulSpec spec;
  spec.alpha = c.alpha;
  spec.beta = c.beta;
  spec.epilogue = c.f;
  const device_model::Program prog =
      kernels::build_matmul("mm", a, b, out, bias, spec, dev.params().core);
  dev.run(0, prog);

  const int64_t K = c.a_sizes.back();
  const HostView ha(hbm, a), hb(hbm, b);
  const std::optional<HostView> hbias =
      bias ? std::optional<HostView>(HostView(hbm, *bias)) : std::nullopt;
  std::vector<int64_t> idx(c.c_sizes.size(), 0);
  std::vector<float> got = reference::read_floats(hbm + out.address, out.dtype, out.numel());
  const double tol = out.dtype == DType::kFp32 ? 1e-4 : 2e-2;
  uint64_t bad = 0, i = 0;
  for (;; ++i) {
    std::vector<int64_t> ai = idx, bi = idx;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      ai.back() = k;
      bi[bi.size() - 2] = k;
      acc += ha.at(ai) * hb.at(bi);
    }
    double r = c.alpha * acc;
    if (hbias) r += c.beta * hbias->at(idx);
    if (c.f == ActFunc::kRelu) r = std::max(r, 0.0);
    if (std::abs(got[i] - r) > tol * (1 + std::abs(r)) && bad++ < 5) {
      ADD_FAILURE() << "element " << i << ": device " << got[i] << ", reference " << r;
    }
    size_t d = idx.size();
    while (d > 0 && ++idx[d - 1] == c.c_sizes[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  EXPECT_EQ(bad, 0u) << "of " << i + 1 << " elements";
  size_t double_row = 0;
  for (const auto& st : prog.streams) {
    for (const auto& in : st.instructions) {
      double_row += in.perf_mode == device_model::MatmulPerfMode::kDoubleRow;
    }
  }
  return double_row;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // K-major A (A^T stored) @ row-major B: partial m, k and n tiles, N over one moving tile.
  v.push_back({{200, 300}, {300, 700}, {200, 700}, {1, 0}, {0, 1}});
  // Natural A (row-major) @ row-major B.
  v.push_back({{130, 260}, {260, 600}, {130, 600}, {0, 1}, {0, 1}});
  // x @ w.t(): both natural, small M with several moving tiles per group.
  v.push_back({{64, 384}, {384, 1100}, {64, 1100}, {0, 1}, {1, 0}});
  // K-major A @ natural B.
  v.push_back({{300, 200}, {200, 260}, {300, 260}, {1, 0}, {1, 0}});
  // A gathered element by element (neither dim contiguous).
  v.push_back({{40, 50},
               {50, 70},
               {40, 70},
               {0, 1},
               {0, 1},
               DType::kFp32,
               false,
               false,
               1,
               1,
               ActFunc::kCopy,
               2});
  // Batched, natural A, B broadcast over the batch.
  v.push_back({{3, 70, 90}, {90, 150}, {3, 70, 150}, {0, 1, 2}, {0, 1}});
  // Batched natural B (attention scores q @ k^T).
  v.push_back({{2, 96, 64}, {2, 64, 96}, {2, 96, 96}, {0, 1, 2}, {0, 2, 1}});
  // Bias broadcast over rows, alpha, beta, relu.
  v.push_back({{150, 200},
               {200, 530},
               {150, 530},
               {0, 1},
               {0, 1},
               DType::kFp32,
               true,
               false,
               2.0f,
               0.5f,
               ActFunc::kRelu});
  // Bias per row with the plain epilogue.
  v.push_back({{140, 130}, {130, 90}, {140, 90}, {1, 0}, {0, 1}, DType::kFp32, true, true});
  // K == 0 with a bias.
  v.push_back({{20, 0}, {0, 30}, {20, 30}, {0, 1}, {0, 1}, DType::kFp32, true, false, 1, 2});
  // Vector operands (mv / dot shapes).
  v.push_back({{1, 700}, {700, 1}, {1, 1}, {0, 1}, {0, 1}});
  v.push_back({{300, 700}, {700, 1}, {300, 1}, {0, 1}, {0, 1}});
  // Decode shapes run weight-stationary (C^T, transposed back): natural weight with a bias,
  // alpha, beta and relu; K-major weight; batched.
  v.push_back({{8, 300},
               {300, 900},
               {8, 900},
               {0, 1},
               {1, 0},
               DType::kFp32,
               true,
               false,
               2.0f,
               0.5f,
               ActFunc::kRelu});
  v.push_back({{5, 260}, {260, 1030}, {5, 1030}, {0, 1}, {0, 1}});
  v.push_back({{2, 3, 200}, {2, 200, 600}, {2, 3, 600}, {0, 1, 2}, {0, 2, 1}});
  v.push_back({{16, 384}, {384, 1024}, {16, 1024}, {0, 1}, {1, 0}, DType::kBf16, true});
  // bf16 with an fp32-accumulated long K.
  v.push_back({{256, 1536}, {1536, 640}, {256, 640}, {1, 0}, {0, 1}, DType::kBf16});
  v.push_back({{130, 600}, {600, 520}, {130, 520}, {0, 1}, {1, 0}, DType::kBf16});
  // Both K-major over several groups, every dim ragged: the first group's loads in column
  // pieces, the last group finishing tile by tile over its last k-tiles in 64-column tiles.
  v.push_back({{300, 700}, {700, 1100}, {300, 1100}, {1, 0}, {0, 1}, DType::kBf16});
  // ... with a bias, alpha, beta and relu on those tiles (fp32), and batched.
  v.push_back({{200, 300},
               {300, 1100},
               {200, 1100},
               {1, 0},
               {0, 1},
               DType::kFp32,
               true,
               false,
               2.0f,
               0.5f,
               ActFunc::kRelu});
  v.push_back({{2, 130, 300}, {2, 300, 200}, {2, 130, 200}, {0, 2, 1}, {0, 1, 2}});
  return v;
}

TEST(MatmulKernel, MatchesReferenceForEveryLayout) {
  auto dev = testing::make_device("trn1");
  for (const Case& c : cases()) {
    SCOPED_TRACE(fmt::format("A {} B {}", fmt::join(c.a_sizes, "x"), fmt::join(c.b_sizes, "x")));
    run_case(*dev, c);
  }
}

// ARCH-v3 double FP8: on trn2 an FP8 x FP8 product contracts pairs of full k-tiles per
// double-row matmul ([P, 2, F] operands, contraction 256); the odd or partial k-tile left over
// takes a regular matmul. Same values as the reference over the fp8 inputs, and the program
// really uses double-row instructions (trn1 has none: regular matmuls only). One preset per
// test: one Device per process.
void check_fp8(const std::string& preset) {
  auto dev = testing::make_device(preset);
  for (DType dt : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    // K-major A @ row-major B with K = 4.7 k-tiles; natural A @ natural B (TensorE transposes)
    // with K = 3 full k-tiles.
    Case km{{200, 600}, {600, 700}, {200, 700}, {1, 0}, {0, 1}, dt};
    Case nat{{130, 384}, {384, 520}, {130, 520}, {0, 1}, {1, 0}, dt};
    for (Case c : {km, nat}) {
      c.out_dt = DType::kBf16;
      SCOPED_TRACE(fmt::format("{} {} A {} B {}", preset, device_model::dtype_name(dt),
                               fmt::join(c.a_sizes, "x"), fmt::join(c.b_sizes, "x")));
      const size_t dr = run_case(*dev, c);
      if (preset == "trn2") {
        EXPECT_GT(dr, 0u) << "no double-row matmul on trn2";
      } else {
        EXPECT_EQ(dr, 0u) << "trn1 has no double-row mode";
      }
    }
  }
}

TEST(MatmulKernel, Fp8DoubleRowMatchesReferenceOnTrn2) {
  check_fp8("trn2");
}

TEST(MatmulKernel, Fp8MatchesReferenceWithRegularMatmulsOnTrn1) {
  check_fp8("trn1");
}

// 24 KiB of SBUF per partition cannot hold a resident block: chunks roll and re-stream.
TEST(MatmulKernel, MatchesReferenceWhenSbufIsSmall) {
  auto dev = testing::make_device("trn1", {"sbuf.partition_bytes=24576"});
  for (const Case& c : cases()) {
    SCOPED_TRACE(fmt::format("A {} B {}", fmt::join(c.a_sizes, "x"), fmt::join(c.b_sizes, "x")));
    run_case(*dev, c);
  }
  Case big{{200, 1000}, {1000, 600}, {200, 600}, {0, 1}, {1, 0}};
  run_case(*dev, big);
}

// SCALE-Sim's weight-stationary order (ncsim scalesim) computes the same product, written as
// C^T; with M beyond the PSUM banks the partial sums accumulate in SBUF.
TEST(MatmulKernel, WeightStationaryGemmMatchesReference) {
  auto dev = testing::make_device("trn1");
  for (auto [m, k, n] : {std::array<uint32_t, 3>{100, 300, 200}, {4200, 200, 150}}) {
    kernels::GemmSpec s;
    s.m = m, s.k = k, s.n = n;
    s.in_dtype = s.out_dtype = DType::kFp32;
    const kernels::GemmAddresses ad{0, 16 << 20, 0, 32 << 20};
    uint8_t* hbm = dev->hbm_data();
    reference::fill_normal(hbm + ad.a_t, s.in_dtype, uint64_t{k} * m, 1);
    reference::fill_normal(hbm + ad.b, s.in_dtype, uint64_t{k} * n, 2);
    dev->run(0, kernels::build_gemm_weight_stationary(s, ad, dev->params().core));
    const auto at = reference::read_floats(hbm + ad.a_t, s.in_dtype, uint64_t{k} * m);
    const auto b = reference::read_floats(hbm + ad.b, s.in_dtype, uint64_t{k} * n);
    const auto ct = reference::read_floats(hbm + ad.c, s.out_dtype, uint64_t{m} * n);
    uint64_t bad = 0;
    for (uint32_t j = 0; j < n; ++j) {
      for (uint32_t i = 0; i < m; ++i) {
        double r = 0;
        for (uint32_t x = 0; x < k; ++x)
          r += double{at[uint64_t{x} * m + i]} * b[uint64_t{x} * n + j];
        if (std::abs(ct[uint64_t{j} * m + i] - r) > 1e-4 * (1 + std::abs(r))) ++bad;
      }
    }
    EXPECT_EQ(bad, 0u) << m << "x" << k << "x" << n;
  }
}

}  // namespace
}  // namespace neuronsim
