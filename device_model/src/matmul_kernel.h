#pragma once
// The functional matmul's inner product, vectorised: built for AVX2 next to the baseline and
// picked at load time (the only code of the device model with its own compile flags).
#include <cstdint>

namespace neuronsim::device_model::exec {

/// res[m, n] = sum_k st[m, k] * mv[k, n] (st is M x K, mv is K x N, res is M x N, row-major):
/// every product rounded to fp32, the sum accumulated from 0 in k order in fp32.
void matmul_kernel(const float* st, const float* mv, float* res, uint32_t M, uint32_t K,
                   uint32_t N);

}  // namespace neuronsim::device_model::exec
