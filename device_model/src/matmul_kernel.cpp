#include "matmul_kernel.h"

#include <cstddef>
#include <cstring>

namespace neuronsim::device_model::exec {

// Eight fp32 lanes (GCC/Clang vector extension): lane-wise IEEE adds and multiplies, exactly the
// scalar operations (-ffp-contract=off: never fused).
// (Loaded and stored with memcpy in place: no function takes or returns one, which would depend
// on the vector ABI.)
typedef float Float8 __attribute__((vector_size(32)));

// An AVX2 build of the kernel next to the baseline one, picked at load time (x86-64 only).
#if defined(__x86_64__)
#define NEURONSIM_MATMUL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NEURONSIM_MATMUL_CLONES
#endif

// res[m, n] = sum_k st[m, k] * mv[k, n] (st is M x K, mv is K x N, res is M x N, row-major):
// every product rounded to fp32, the sum accumulated from 0 in k order in fp32. Blocks of 4 rows
// x 8 columns keep their sums in registers; the result is the same as one row at a time.
NEURONSIM_MATMUL_CLONES void matmul_kernel(const float* st, const float* mv, float* res, uint32_t M,
                                           uint32_t K, uint32_t N) {
  const size_t k_len = K, n_len = N;
  auto row_tail = [&](uint32_t m, uint32_t n_begin) {  // one row, columns [n_begin, N)
    const float* a = st + m * k_len;
    uint32_t n = n_begin;
    for (; n + 8 <= N; n += 8) {
      Float8 acc = {}, b;
      for (uint32_t k = 0; k < K; ++k) {
        std::memcpy(&b, mv + k * n_len + n, sizeof b);
        acc = acc + a[k] * b;
      }
      std::memcpy(res + m * n_len + n, &acc, sizeof acc);
    }
    for (; n < N; ++n) {
      float acc = 0.0f;
      for (uint32_t k = 0; k < K; ++k) acc = acc + a[k] * mv[k * n_len + n];
      res[m * n_len + n] = acc;
    }
  };
  uint32_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const float* a0 = st + m * k_len;
    const float* a1 = a0 + k_len;
    const float* a2 = a1 + k_len;
    const float* a3 = a2 + k_len;
    uint32_t n = 0;
    for (; n + 8 <= N; n += 8) {
      Float8 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {}, b;
      for (uint32_t k = 0; k < K; ++k) {
        std::memcpy(&b, mv + k * n_len + n, sizeof b);
        acc0 = acc0 + a0[k] * b;
        acc1 = acc1 + a1[k] * b;
        acc2 = acc2 + a2[k] * b;
        acc3 = acc3 + a3[k] * b;
      }
      std::memcpy(res + m * n_len + n, &acc0, sizeof acc0);
      std::memcpy(res + (m + 1) * n_len + n, &acc1, sizeof acc1);
      std::memcpy(res + (m + 2) * n_len + n, &acc2, sizeof acc2);
      std::memcpy(res + (m + 3) * n_len + n, &acc3, sizeof acc3);
    }
    for (uint32_t r = 0; r < 4; ++r) row_tail(m + r, n);
  }
  for (; m < M; ++m) row_tail(m, 0);
}

}  // namespace neuronsim::device_model::exec
