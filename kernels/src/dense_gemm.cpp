#include "neuronsim/kernels/dense_gemm.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/kernels/matmul.h"

namespace neuronsim::kernels {

using namespace device_model;

Program build_gemm(const GemmSpec& s, const GemmAddresses& addr, const CoreParams& core) {
  if (s.m == 0 || s.k == 0 || s.n == 0) throw std::invalid_argument("gemm: empty shape");
  const int64_t m = s.m, k = s.k, n = s.n;
  // A given as A^T [k, m] row-major: A[i, j] sits at j * m + i.
  const TensorDesc a{addr.a_t, s.in_dtype, {m, k}, {1, m}};
  const TensorDesc b{addr.b, s.in_dtype, {k, n}, {n, 1}};
  const TensorDesc c{addr.c, s.out_dtype, {m, n}, {n, 1}};
  std::optional<TensorDesc> bias;
  if (s.bias) bias = TensorDesc{addr.bias, s.in_dtype, {n}, {1}};
  MatmulSpec spec;
  spec.epilogue = s.epilogue;
  Program p = build_matmul(fmt::format("gemm_{}x{}x{}", s.m, s.k, s.n), a, b, c, bias, spec, core);
  const uint64_t es = dtype_size(s.in_dtype);
  p.hbm_regions = {{"a_t", addr.a_t, uint64_t{s.k} * s.m * es},
                   {"b", addr.b, uint64_t{s.k} * s.n * es},
                   {"c", addr.c, uint64_t{s.m} * s.n * dtype_size(s.out_dtype)}};
  if (s.bias) p.hbm_regions.push_back({"bias", addr.bias, uint64_t{s.n} * es});
  return p;
}

}  // namespace neuronsim::kernels
