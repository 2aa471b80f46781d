// The flash attention kernel against a double-precision host reference over the same rounded
// inputs: fp32 and bf16, causal and not, additive masks (one wholly masking a row's first key
// block), sequence lengths that are not multiples of 128, several key blocks, broadcast batch
// dims, a K stored transposed; its bad-input errors; and its cost against the unfused
// bmm + softmax + bmm: HBM traffic of Q, K, V and O only, and less simulated time.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "neuronsim/kernels/attention.h"
#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/softmax.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using kernels::TensorDesc;

std::vector<int64_t> row_major(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d-- > 0;) s[d] = s[d + 1] * sizes[d + 1];
  return s;
}

uint64_t span(const TensorDesc& t) {
  uint64_t hi = 1;
  for (size_t d = 0; d < t.sizes.size(); ++d) hi += (t.sizes[d] - 1) * t.strides[d];
  return hi;
}

// Element `idx` (right-aligned to `t`'s dims, size-1 dims broadcast) of host data `h`.
double at(const TensorDesc& t, const std::vector<float>& h, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t k = idx.size() - t.sizes.size();
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    off += (t.sizes[d] == 1 ? 0 : idx[k + d]) * t.strides[d];
  }
  return h[static_cast<size_t>(off)];
}

struct Case {
  std::vector<int64_t> batch;
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  DType dt = DType::kFp32;
  bool causal = false;
  enum class Mask { kNone, kRandom, kLeftPad } mask = Mask::kNone;
  bool k_transposed = false;    // K stored [..., D, Sk] and viewed as [..., Sk, D]
  bool kv_broadcast = false;    // K and V with batch size 1 in their first batch dim
  bool mask_per_batch = false;  // the mask has the output's batch dims
};

class Placer {
 public:
  explicit Placer(uint8_t* hbm) : hbm_(hbm) {}
  void place(TensorDesc& t) {
    t.address = next_;
    next_ += (span(t) * device_model::dtype_size(t.dtype) + 4095) / 4096 * 4096;
  }
  void fill(const TensorDesc& t, uint64_t seed) {
    reference::fill_normal(hbm_ + t.address, t.dtype, span(t), seed);
  }
  std::vector<float> read(const TensorDesc& t) const {
    return reference::read_floats(hbm_ + t.address, t.dtype, span(t));
  }

 private:
  uint8_t* hbm_;
  uint64_t next_ = 0;
};

void run_case(device_model::Device& dev, const Case& c) {
  SCOPED_TRACE(::testing::Message()
               << "sq " << c.sq << " sk " << c.sk << " d " << c.d << " causal " << c.causal);
  Placer pl(dev.hbm_data());
  auto with = [](std::vector<int64_t> b, int64_t x, int64_t y) {
    b.push_back(x);
    b.push_back(y);
    return b;
  };
  std::vector<int64_t> kvb = c.batch;
  if (c.kv_broadcast) kvb[0] = 1;
  TensorDesc q{0, c.dt, with(c.batch, c.sq, c.d), {}};
  q.strides = row_major(q.sizes);
  TensorDesc k{0, c.dt, with(kvb, c.sk, c.d), {}};
  k.strides = row_major(k.sizes);
  if (c.k_transposed) {
    const std::vector<int64_t> st = row_major(with(kvb, c.d, c.sk));
    k.strides = st;
    std::swap(k.strides[st.size() - 1], k.strides[st.size() - 2]);
  }
  TensorDesc v{0, c.dt, with(kvb, c.sk, c.dv), {}};
  v.strides = row_major(v.sizes);
  TensorDesc o{0, c.dt, with(c.batch, c.sq, c.dv), {}};
  o.strides = row_major(o.sizes);
  std::optional<TensorDesc> mask;
  for (TensorDesc* t : {&q, &k, &v, &o}) pl.place(*t);
  pl.fill(q, 1);
  pl.fill(k, 2);
  pl.fill(v, 3);
  std::vector<float> mh;
  if (c.mask != Case::Mask::kNone) {
    // [Sq, Sk] broadcast over the batch (kept in SBUF), or one per batch (streamed).
    const std::vector<int64_t> ms =
        c.mask_per_batch ? with(c.batch, c.sq, c.sk) : std::vector<int64_t>{c.sq, c.sk};
    mask = TensorDesc{0, DType::kFp32, ms, row_major(ms)};
    pl.place(*mask);
    pl.fill(*mask, 4);
    auto* m = reinterpret_cast<float*>(dev.hbm_data() + mask->address);
    const float ninf = -std::numeric_limits<float>::infinity();
    for (uint64_t e = 0; e < mask->numel(); ++e) {
      const int64_t i = static_cast<int64_t>(e) / c.sk % c.sq, j = static_cast<int64_t>(e) % c.sk;
      float& x = m[e];
      if (c.mask == Case::Mask::kLeftPad) {
        x = j < 520 && i % 2 == 0 ? ninf : 0.0f;  // even rows: their first key block masked
      } else if ((i * 7 + j * 3 + static_cast<int64_t>(e) / (c.sq * c.sk)) % 11 == 0 &&
                 j != i % c.sk) {
        x = ninf;
      }
    }
    mh = pl.read(*mask);
  }
  kernels::AttentionSpec spec;
  spec.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  spec.causal = c.causal;
  const device_model::Program prog =
      kernels::build_flash_attention("attn", q, k, v, o, mask, spec, dev.params().core);
  dev.run(0, prog);

  const std::vector<float> qh = pl.read(q), kh = pl.read(k), vh = pl.read(v), got = pl.read(o);
  const double tol = c.dt == DType::kFp32 ? 2e-4 : 3e-2;
  uint64_t bad = 0, n = 0;
  std::vector<int64_t> bidx(c.batch.size(), 0);
  int64_t batches = 1;
  for (int64_t s : c.batch) batches *= s;
  std::vector<double> s(static_cast<size_t>(c.sk));
  // One batch's operands gathered densely (the reference's inner loops stay cheap).
  auto gather = [&](const TensorDesc& t, const std::vector<float>& h, int64_t rows, int64_t cols) {
    std::vector<double> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t e = 0; e < cols; ++e)
        out[static_cast<size_t>(r * cols + e)] = at(t, h, with(bidx, r, e));
    }
    return out;
  };
  for (int64_t b = 0; b < batches; ++b) {
    const std::vector<double> qb = gather(q, qh, c.sq, c.d), kb = gather(k, kh, c.sk, c.d),
                              vb = gather(v, vh, c.sk, c.dv), ob = gather(o, got, c.sq, c.dv);
    const std::vector<double> mbat = mask ? gather(*mask, mh, c.sq, c.sk) : std::vector<double>{};
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c.sk; ++j) {
        double acc = 0;
        for (int64_t d = 0; d < c.d; ++d)
          acc += qb[static_cast<size_t>(i * c.d + d)] * kb[static_cast<size_t>(j * c.d + d)];
        acc *= spec.scale;
        if (mask) acc += mbat[static_cast<size_t>(i * c.sk + j)];
        if (c.causal && j > i) acc = -std::numeric_limits<double>::infinity();
        s[static_cast<size_t>(j)] = acc;
        mx = std::max(mx, acc);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < c.dv; ++e) {
        double r = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          r += s[static_cast<size_t>(j)] * vb[static_cast<size_t>(j * c.dv + e)];
        r /= sum;
        const double g = ob[static_cast<size_t>(i * c.dv + e)];
        ++n;
        if (!(std::abs(g - r) <= tol * (1 + std::abs(r))) && bad++ < 5) {
          ADD_FAILURE() << "batch " << b << " row " << i << " col " << e << ": device " << g
                        << ", reference " << r;
        }
      }
    }
    for (size_t d = bidx.size(); d-- > 0;) {
      if (++bidx[d] < c.batch[d]) break;
      bidx[d] = 0;
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << n << " elements";
}

TEST(FlashAttention, Fp32OneKeyBlockPartialTiles) {
  auto dev = testing::make_device();
  run_case(*dev, {{2}, 300, 300, 64, 64});
}

TEST(FlashAttention, Fp32CausalSeveralKeyBlocks) {
  auto dev = testing::make_device();
  Case c{{1}, 700, 700, 64, 64};
  c.causal = true;
  run_case(*dev, c);
}

TEST(FlashAttention, Bf16CausalFourDimBatch) {
  auto dev = testing::make_device();
  Case c{{2, 3}, 1030, 1030, 32, 32, DType::kBf16};
  c.causal = true;
  run_case(*dev, c);
}

TEST(FlashAttention, Bf16AdditiveMaskWideHeadNarrowValue) {
  auto dev = testing::make_device();
  Case c{{2}, 200, 600, 128, 64, DType::kBf16};
  c.mask = Case::Mask::kRandom;
  run_case(*dev, c);
}

TEST(FlashAttention, Fp32PerBatchMaskStreamsWithTheKeys) {
  auto dev = testing::make_device();
  Case c{{2, 2}, 140, 700, 32, 32};
  c.mask = Case::Mask::kRandom;
  c.mask_per_batch = true;
  c.causal = true;
  run_case(*dev, c);
}

TEST(FlashAttention, MaskedFirstKeyBlockRescalesAway) {
  auto dev = testing::make_device();
  Case c{{1}, 130, 1100, 64, 64};
  c.mask = Case::Mask::kLeftPad;
  run_case(*dev, c);
}

TEST(FlashAttention, DecodeRowTransposedKeysBroadcastBatch) {
  auto dev = testing::make_device();
  Case c{{3}, 1, 900, 64, 64};
  c.k_transposed = true;
  c.kv_broadcast = true;
  run_case(*dev, c);
}

TEST(FlashAttention, CausalMoreQueriesThanKeys) {
  auto dev = testing::make_device();
  Case c{{1}, 300, 200, 16, 16};
  c.causal = true;
  run_case(*dev, c);
}

TEST(FlashAttention, BadInputsNameTheProblem) {
  auto dev = testing::make_device();
  const auto& core = dev->params().core;
  auto t = [](DType dt, std::vector<int64_t> sizes) {
    TensorDesc d{0, dt, sizes, row_major(sizes)};
    return d;
  };
  kernels::AttentionSpec spec;
  auto build = [&](const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                   const TensorDesc& o, float scale = 1.0f) {
    spec.scale = scale;
    kernels::build_flash_attention("bad", q, k, v, o, std::nullopt, spec, core);
  };
  const TensorDesc q = t(DType::kFp32, {2, 64, 32}), k = t(DType::kFp32, {2, 80, 32}),
                   v = t(DType::kFp32, {2, 80, 32}), o = t(DType::kFp32, {2, 64, 32});
  EXPECT_NO_THROW(build(q, k, v, o));
  EXPECT_THROW(build(q, t(DType::kFp32, {2, 80, 16}), v, o), std::invalid_argument);
  EXPECT_THROW(build(t(DType::kFp32, {2, 64, 200}), t(DType::kFp32, {2, 80, 200}), v, o),
               std::invalid_argument);
  EXPECT_THROW(build(q, t(DType::kBf16, {2, 80, 32}), v, o), std::invalid_argument);
  EXPECT_THROW(build(q, t(DType::kFp32, {3, 80, 32}), t(DType::kFp32, {3, 80, 32}), o),
               std::invalid_argument);
  EXPECT_THROW(build(q, k, v, o, 0.0f), std::invalid_argument);
  EXPECT_THROW(build(q, k, v, o, std::numeric_limits<float>::quiet_NaN()), std::invalid_argument);
  EXPECT_THROW(build(q, t(DType::kFp32, {2, 0, 32}), t(DType::kFp32, {2, 0, 32}), o),
               std::invalid_argument);
  try {
    build(q, t(DType::kFp32, {2, 80, 16}), v, o);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("do not match"), std::string::npos) << e.what();
  }
}

// S = 1024, D = 64, 8 heads, bf16: the fused program moves Q, K, V and O through HBM once and
// takes less simulated time than bmm, softmax and bmm with S and P in HBM.
TEST(FlashAttention, CostRuleBeatsUnfusedAndMovesOnlyQKVO) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  const int64_t g = 8, s = 1024, d = 64;
  auto t = [](std::vector<int64_t> sizes, uint64_t addr) {
    return TensorDesc{addr, DType::kBf16, sizes, row_major(sizes)};
  };
  const uint64_t mib = 1 << 20;
  const TensorDesc q = t({g, s, d}, 0), k = t({g, s, d}, 4 * mib), v = t({g, s, d}, 8 * mib),
                   o = t({g, s, d}, 12 * mib);
  for (bool causal : {false, true}) {
    kernels::AttentionSpec spec;
    spec.scale = 0.125f;
    spec.causal = causal;
    const auto flash = testing::run_and_summarize(
        *dev, kernels::build_flash_attention("flash", q, k, v, o, std::nullopt, spec, core));
    const double qkvo = 4.0 * g * s * d * 2;
    EXPECT_GE(flash.hbm_bytes, qkvo);
    EXPECT_LE(flash.hbm_bytes, qkvo * 1.01) << "causal " << causal;
    // Unfused: scores = q @ k^T (bf16 in HBM), softmax, o = p @ v.
    TensorDesc kt = k;
    kt.sizes = {g, d, s};
    kt.strides = {s * d, 1, d};
    const TensorDesc scores = t({g, s, s}, 16 * mib), probs = t({g, s, s}, 48 * mib);
    kernels::MatmulSpec mm;
    mm.alpha = 0.125f;
    double unfused = 0;
    unfused += testing::run_and_summarize(
                   *dev, kernels::build_matmul("qk", q, kt, scores, std::nullopt, mm, core))
                   .duration()
                   .seconds();
    unfused += testing::run_and_summarize(
                   *dev, kernels::build_softmax("softmax", scores, probs, 2, false, core))
                   .duration()
                   .seconds();
    unfused += testing::run_and_summarize(
                   *dev, kernels::build_matmul("pv", probs, v, o, std::nullopt, {}, core))
                   .duration()
                   .seconds();
    const double fused = flash.duration().seconds();
    std::printf(
        "flash attention S=%lld D=%lld x%lld bf16 causal=%d: fused %.1f us, unfused "
        "%.1f us, HBM %.2f MiB (Q+K+V+O %.2f MiB)\n",
        static_cast<long long>(s), static_cast<long long>(d), static_cast<long long>(g), causal,
        fused * 1e6, unfused * 1e6, flash.hbm_bytes / mib, qkvo / mib);
    for (const auto& e : flash.engines) {
      std::printf("  %-18s %6llu instructions, busy %.1f us\n", e.engine.c_str(),
                  static_cast<unsigned long long>(e.instructions), e.busy.us());
    }
    EXPECT_LT(fused, unfused) << "causal " << causal;
  }
}

}  // namespace
}  // namespace neuronsim
