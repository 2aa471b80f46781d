// topk and sort over long rows (kernels/selection.h, Note [Long-row selection]): full-mode runs
// on random rows with many ties, NaNs, infinities and signed zeros, against std::stable_sort
// with PyTorch's order (NaN largest, equal values in index order); simulated times against the
// one-lane short-row kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "neuronsim/kernels/selection.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using kernels::TensorDesc;

device_model::Device& shared_device() {
  static const std::unique_ptr<device_model::Device> dev = testing::make_device();
  return *dev;
}

uint64_t align(uint64_t v) {
  return (v + 4095) / 4096 * 4096;
}

// Rows of values drawn from a small set (ties everywhere), with NaN, +-inf, -0.0 and a few
// distinct normals; every value exact in bf16.
std::vector<float> make_rows(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99), small(-24, 24);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (float& x : v) {
    const int c = pick(rng);
    if (c < 3)
      x = std::numeric_limits<float>::quiet_NaN();
    else if (c < 5)
      x = std::numeric_limits<float>::infinity();
    else if (c < 7)
      x = -std::numeric_limits<float>::infinity();
    else if (c < 9)
      x = -0.0f;
    else if (c < 40) {  // bf16-exact normals: the top 16 bits of a float
      float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      bits &= 0xffff0000u;
      std::memcpy(&x, &bits, 4);
    } else
      x = 0.5f * static_cast<float>(small(rng));
  }
  return v;
}

void write_rows(uint8_t* hbm, DType t, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFp32) {
      std::memcpy(hbm + 4 * i, &v[i], 4);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      const uint16_t h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(hbm + 2 * i, &h, 2);
    }
  }
}

// PyTorch's stable order of one row: ascending (NaN last) or descending (NaN first), ties by index.
std::vector<int32_t> stable_order(const float* row, int64_t n, bool descending) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    const float x = row[a], y = row[b];
    if (descending) return (std::isnan(x) && !std::isnan(y)) || x > y;
    return (!std::isnan(x) && std::isnan(y)) || x < y;
  });
  return idx;
}

struct Result {
  double seconds = 0;
  uint64_t instructions = 0;
};

// Runs topk (k > 0) or sort (k == 0) on `rows` x n and checks every value and index (the
// short-row kernel's values are not checked: its rounds do not order NaN).
// `columns`: the tensors are stored [n, rows] and selected along dim 0 (strided rows).
Result run_case(int64_t rows, int64_t n, int64_t k, bool descending, DType dt, uint32_t seed,
                bool long_kernel = true, bool columns = false) {
  device_model::Device& dev = shared_device();
  const int64_t m = k > 0 ? k : n;
  const uint64_t es = device_model::dtype_size(dt);
  TensorDesc in{0, dt, {rows, n}, {n, 1}};
  TensorDesc vals{align(rows * n * es), dt, {rows, m}, {m, 1}};
  TensorDesc idx{vals.address + align(rows * m * es), DType::kInt32, {rows, m}, {m, 1}};
  const int64_t dim = columns ? 0 : 1;
  if (columns) {
    in.sizes = {n, rows};
    in.strides = {rows, 1};
    vals.sizes = idx.sizes = {m, rows};
    vals.strides = idx.strides = {rows, 1};
  }
  // Element j of row r at r * n + j in memory, or at j * rows + r with `columns`.
  auto at = [&](int64_t r, int64_t j, int64_t len) { return columns ? j * rows + r : r * len + j; };
  const std::vector<float> x = make_rows(rows, n, seed);
  std::vector<float> image(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) image[at(r, j, n)] = x[r * n + j];
  uint8_t* hbm = dev.hbm_data();
  write_rows(hbm, dt, image);
  const auto& core = dev.params().core;
  device_model::Program p =
      k > 0
          ? (long_kernel ? kernels::build_topk_long("topk", in, vals, idx, dim, k, descending, core)
                         : kernels::build_topk("topk", in, vals, idx, dim, k, descending, core))
          : kernels::build_sort_long("sort", in, vals, idx, dim, descending, core);
  Result r;
  for (const auto& s : p.streams) r.instructions += s.instructions.size();
  r.seconds = dev.run(0, p).duration().ps * 1e-12;
  const std::vector<float> got_v = reference::read_floats(hbm + vals.address, dt, rows * m);
  std::vector<int32_t> got_i(static_cast<size_t>(rows * m));
  std::memcpy(got_i.data(), hbm + idx.address, got_i.size() * 4);
  uint64_t bad = 0;
  for (int64_t r0 = 0; long_kernel && r0 < rows; ++r0) {
    const float* row = x.data() + r0 * n;
    const std::vector<int32_t> order = stable_order(row, n, descending);
    for (int64_t j = 0; j < m; ++j) {
      const float want = row[order[j]], v = got_v[at(r0, j, m)];
      const int32_t gi = got_i[at(r0, j, m)];
      const bool value_ok = std::isnan(want) ? std::isnan(v) : v == want;
      if ((!value_ok || gi != order[j]) && bad++ < 5) {
        ADD_FAILURE() << "row " << r0 << " position " << j << ": device " << v << " @" << gi
                      << ", reference " << want << " @" << order[j];
      }
    }
  }
  EXPECT_EQ(bad, 0u) << rows << " x " << n << " k " << k << (descending ? " desc " : " asc ")
                     << device_model::dtype_name(dt);
  return r;
}

TEST(SelectionKernel, LongTopkMatchesStableReference) {
  for (int64_t n : {1500, 4096, 32000, 50257}) {
    for (int64_t rows : {1, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << n);
      run_case(rows, n, 50, true, DType::kFp32, static_cast<uint32_t>(n + rows));
    }
  }
  // Smallest first, bf16, a k above a partition's chunk (C = 12 for 1500, candidates padded).
  run_case(3, 32000, 50, false, DType::kFp32, 11);
  run_case(8, 50257, 50, true, DType::kBf16, 12);
  run_case(2, 1500, 100, true, DType::kFp32, 13);
  run_case(2, 1500, 100, false, DType::kBf16, 14);
  // Up to four candidates per partition are picked by rounds instead of the bitonic network.
  run_case(5, 4096, 1, true, DType::kFp32, 15);
  run_case(4, 32000, 3, false, DType::kBf16, 17);
  run_case(2, 50257, 4, true, DType::kFp32, 18);
  run_case(1, 7, 7, true, DType::kFp32, 16);
  // Strided rows: [n, rows] selected along dim 0.
  run_case(3, 5000, 50, true, DType::kFp32, 19, true, /*columns=*/true);
  run_case(2, 3000, 2, false, DType::kBf16, 20, true, /*columns=*/true);
  // More rows than one tile takes (16): a second row group reuses the buffers.
  run_case(20, 4096, 50, true, DType::kFp32, 27);
  run_case(18, 4096, 3, true, DType::kFp32, 28);
}

TEST(SelectionKernel, LongSortMatchesStableSort) {
  for (int64_t n : {1500, 4096, 32000, 50257}) {
    for (int64_t rows : {1, 3, 8}) {
      if (n >= 32000 && rows == 3) continue;  // keeps the test's host time down
      SCOPED_TRACE(::testing::Message() << rows << " x " << n);
      run_case(rows, n, 0, (n + rows) % 2 == 0, DType::kFp32, static_cast<uint32_t>(n * rows));
    }
  }
  run_case(3, 4096, 0, true, DType::kBf16, 21);
  run_case(2, 32000, 0, false, DType::kBf16, 22);
  run_case(1, 1025, 0, true, DType::kFp32, 23);
  run_case(2, 300, 0, false, DType::kFp32, 24);
  run_case(3, 5000, 0, true, DType::kFp32, 25, true, /*columns=*/true);
  // More rows than one tile takes (16): a second row group reuses the buffers.
  run_case(20, 1500, 0, false, DType::kFp32, 26);
}

TEST(SelectionKernel, LongTopkIsFarCheaperThanOneLanePerRow) {
  // [1, 4096] topk(50): the short-row kernel's 50 rounds over 4096 elements on one lane against
  // 128 lanes of 32 elements and a 7-level merge.
  const Result lane = run_case(1, 4096, 50, true, DType::kFp32, 31, /*long_kernel=*/false);
  const Result spread = run_case(1, 4096, 50, true, DType::kFp32, 31);
  EXPECT_LT(spread.seconds * 4, lane.seconds) << spread.seconds << " vs " << lane.seconds;
  const Result vocab = run_case(1, 32000, 50, true, DType::kFp32, 32);
  std::printf(
      "topk(50) [1, 4096]: short-row kernel %.1f us (%llu instructions), long-row %.1f us "
      "(%llu); [1, 32000] %.1f us (%llu)\n",
      lane.seconds * 1e6, static_cast<unsigned long long>(lane.instructions), spread.seconds * 1e6,
      static_cast<unsigned long long>(spread.instructions), vocab.seconds * 1e6,
      static_cast<unsigned long long>(vocab.instructions));
}

// The vocab-row shapes of Hugging Face sampling: simulated time and instruction count of each
// program, and the one-lane selection sort of 1024 elements (the old limit) per element.
TEST(SelectionKernel, LongRowCostsStaySubQuadratic) {
  const Result old_sort = run_case(1, 1024, 1024, false, DType::kFp32, 41, /*long_kernel=*/false);
  const Result new_sort_1k = run_case(1, 1024, 0, false, DType::kFp32, 41);
  std::printf(
      "sort [1, 1024]: selection rounds %.1f us (%.1f ns/element, %llu instructions), "
      "bitonic %.1f us (%llu)\n",
      old_sort.seconds * 1e6, old_sort.seconds * 1e9 / 1024,
      static_cast<unsigned long long>(old_sort.instructions), new_sort_1k.seconds * 1e6,
      static_cast<unsigned long long>(new_sort_1k.instructions));
  EXPECT_LT(new_sort_1k.seconds * 10, old_sort.seconds);
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 32000}, {8, 50257}}) {
    const Result topk = run_case(rows, n, 50, true, DType::kFp32, 42);
    const Result sort = run_case(rows, n, 0, false, DType::kFp32, 43);
    std::printf(
        "[%lld, %lld]: topk(50) %.1f us (%llu instructions), sort %.1f us (%llu, %.1f "
        "ns/element)\n",
        static_cast<long long>(rows), static_cast<long long>(n), topk.seconds * 1e6,
        static_cast<unsigned long long>(topk.instructions), sort.seconds * 1e6,
        static_cast<unsigned long long>(sort.instructions),
        sort.seconds * 1e9 / static_cast<double>(rows * n));
    EXPECT_LT(topk.seconds, sort.seconds);
    // Sub-quadratic: per element, the sort of these rows costs less than the one-lane sort of
    // 1024 (whose per-element cost grows linearly with n).
    EXPECT_LT(sort.seconds / static_cast<double>(rows * n), old_sort.seconds / 1024);
  }
}

// cumsum/cumprod of long rows (build_scan_long) against a sequential double-precision scan:
// within fp32 rounding of the reassociated sums, infinities and NaN where the sequential scan
// has them. Returns the simulated seconds.
double run_scan(int64_t rows, int64_t n, bool product, DType out_dt, uint32_t seed,
                bool specials = false) {
  device_model::Device& dev = shared_device();
  TensorDesc in{0, DType::kFp32, {rows, n}, {n, 1}};
  TensorDesc out{align(rows * n * 4), out_dt, {rows, n}, {n, 1}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (float& v : x) v = product ? 1.0f + (u(rng) - 0.5f) * 0.004f : u(rng);
  if (specials) {  // the last row: +inf, then -inf (sum) or 0 (product), then NaN
    float* r = x.data() + (rows - 1) * n;
    r[n / 3] = std::numeric_limits<float>::infinity();
    r[n / 2] = product ? 0.0f : -std::numeric_limits<float>::infinity();
    r[2 * n / 3] = std::numeric_limits<float>::quiet_NaN();
  }
  write_rows(dev.hbm_data(), DType::kFp32, x);
  const double s =
      dev.run(0, kernels::build_scan_long("scan", in, out, 1, product, dev.params().core))
          .duration()
          .ps *
      1e-12;
  const std::vector<float> got =
      reference::read_floats(dev.hbm_data() + out.address, out_dt, static_cast<uint64_t>(rows * n));
  const double tol = out_dt == DType::kFp32 ? 2e-5 : 8e-3;
  uint64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double acc = product ? 1.0 : 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = x[r * n + j];
      acc = product ? acc * v : acc + v;
      const float g = got[r * n + j];
      const bool ok = std::isnan(acc)   ? std::isnan(g)
                      : std::isinf(acc) ? g == acc
                                        : std::abs(g - acc) <= tol * std::abs(acc) + 1e-30;
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "row " << r << " element " << j << ": device " << g << ", reference "
                      << acc;
    }
  }
  EXPECT_EQ(bad, 0u) << rows << " x " << n << (product ? " cumprod" : " cumsum");
  return s;
}

TEST(SelectionKernel, LongScanMatchesSequentialScan) {
  for (int64_t n : {7000, 32000, 50257}) {
    for (int64_t rows : {1, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << n);
      run_scan(rows, n, false, DType::kFp32, static_cast<uint32_t>(n + rows), rows == 3);
    }
  }
  run_scan(3, 32000, true, DType::kFp32, 51, true);
  run_scan(2, 50257, true, DType::kFp32, 52);
  run_scan(2, 32000, false, DType::kBf16, 53);
  run_scan(1, 129, false, DType::kFp32, 54);
  run_scan(20, 7000, false, DType::kFp32, 56, true);
  // HF's TopP warper: the cumsum of one sorted 32000-long probability row.
  const double s = run_scan(1, 32000, false, DType::kFp32, 55);
  std::printf("cumsum [1, 32000]: %.1f us\n", s * 1e6);
  EXPECT_LT(s, 50e-6);
}

TEST(SelectionKernel, LongKernelsRejectBadInput) {
  const auto& core = shared_device().params().core;
  TensorDesc in{0, DType::kFp32, {2, 5000}, {5000, 1}};
  TensorDesc out{1 << 20, DType::kFp32, {2, 50}, {50, 1}};
  EXPECT_THROW(kernels::build_topk_long("topk", in, out, out, 1, 5001, true, core),
               std::invalid_argument);
  EXPECT_THROW(
      kernels::build_topk_long("topk", in, out, out, 1, kernels::kMaxLongTopk + 1, true, core),
      std::invalid_argument);
  TensorDesc huge{0, DType::kFp32, {1, int64_t{1} << 23}, {int64_t{1} << 23, 1}};
  EXPECT_THROW(kernels::build_sort_long("sort", huge, huge, huge, 1, false, core),
               std::invalid_argument);
  EXPECT_FALSE(kernels::long_topk_fits(100, 101, core));
  // trn1: rows of 2^18 (2048 per partition, two rows per tile) still fit SBUF.
  EXPECT_EQ(kernels::max_long_sort_length(core), int64_t{1} << 18);
  // Whatever the fit checks accept builds (SBUF allocation included), up to the limits.
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 19, int64_t{1} << 21, int64_t{3000000}}) {
    for (int64_t k : {int64_t{50}, int64_t{1024}}) {
      if (!kernels::long_topk_fits(n, k, core)) continue;
      TensorDesc row{0, DType::kFp32, {3, n}, {n, 1}}, res{0, DType::kFp32, {3, k}, {k, 1}};
      EXPECT_NO_THROW(kernels::build_topk_long("topk", row, res, res, 1, k, true, core)) << n;
    }
  }
  for (int64_t n : {kernels::max_long_sort_length(core), kernels::max_long_scan_length(core)}) {
    TensorDesc row{0, DType::kFp32, {3, n}, {n, 1}};
    EXPECT_NO_THROW(n == kernels::max_long_sort_length(core)
                        ? kernels::build_sort_long("sort", row, row, row, 1, true, core)
                        : kernels::build_scan_long("scan", row, row, 1, false, core))
        << n;
  }
  TensorDesc ints{0, DType::kInt32, {2, 50000}, {50000, 1}};
  EXPECT_THROW(kernels::build_scan_long("scan", ints, ints, 1, false, core), std::invalid_argument);
  EXPECT_TRUE(kernels::long_topk_fits(150000, 50, core));
}

}  // namespace
}  // namespace neuronsim
