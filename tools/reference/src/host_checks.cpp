#include "neuronsim/reference/host_checks.h"

#include <algorithm>
#include <cmath>

#include "neuronsim/device_model/executor.h"

namespace neuronsim::reference {

using device_model::DType;
using kernels::GemmAddresses;
using kernels::GemmSpec;
using kernels::LayerNormAddresses;
using kernels::LayerNormSpec;

void fill_normal(uint8_t* dst, DType t, uint64_t count, uint64_t seed, float stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  const size_t es = device_model::dtype_size(t);
  for (uint64_t i = 0; i < count; ++i) device_model::store_float(dst + i * es, t, dist(rng));
}

std::vector<float> read_floats(const uint8_t* src, DType t, uint64_t count) {
  std::vector<float> out(count);
  const size_t es = device_model::dtype_size(t);
  for (uint64_t i = 0; i < count; ++i) out[i] = device_model::load_float(src + i * es, t);
  return out;
}

std::vector<double> gemm(const GemmSpec& s, const uint8_t* hbm, const GemmAddresses& a) {
  const auto at = read_floats(hbm + a.a_t, s.in_dtype, uint64_t{s.k} * s.m);
  const auto b = read_floats(hbm + a.b, s.in_dtype, uint64_t{s.k} * s.n);
  std::vector<float> bias(s.n, 0.0f);
  if (s.bias) bias = read_floats(hbm + a.bias, s.in_dtype, s.n);
  std::vector<double> c(uint64_t{s.m} * s.n, 0.0);
  for (uint32_t k = 0; k < s.k; ++k) {
    for (uint32_t i = 0; i < s.m; ++i) {
      const double x = at[uint64_t{k} * s.m + i];
      double* row = &c[uint64_t{i} * s.n];
      const float* brow = &b[uint64_t{k} * s.n];
      for (uint32_t j = 0; j < s.n; ++j) row[j] += x * brow[j];
    }
  }
  for (uint64_t i = 0; i < c.size(); ++i) {
    const float v = static_cast<float>(c[i] + bias[i % s.n]);
    c[i] = device_model::apply_activation(s.epilogue, v);
  }
  return c;
}

std::vector<double> layernorm(const LayerNormSpec& s, const uint8_t* hbm,
                              const LayerNormAddresses& a) {
  const auto x = read_floats(hbm + a.x, s.dtype, uint64_t{s.rows} * s.dim);
  const auto g = read_floats(hbm + a.gamma, s.dtype, s.dim);
  const auto bt = read_floats(hbm + a.beta, s.dtype, s.dim);
  std::vector<double> y(x.size());
  for (uint32_t r = 0; r < s.rows; ++r) {
    const float* row = &x[uint64_t{r} * s.dim];
    double mean = 0, var = 0;
    for (uint32_t j = 0; j < s.dim; ++j) mean += row[j];
    mean /= s.dim;
    for (uint32_t j = 0; j < s.dim; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= s.dim;
    const double rstd = 1.0 / std::sqrt(var + s.eps);
    for (uint32_t j = 0; j < s.dim; ++j) {
      y[uint64_t{r} * s.dim + j] = (row[j] - mean) * rstd * g[j] + bt[j];
    }
  }
  return y;
}

Comparison compare(const std::vector<float>& d, const std::vector<double>& r, double atol,
                   double rtol) {
  Comparison c;
  for (size_t i = 0; i < d.size() && i < r.size(); ++i) {
    const double err = std::fabs(static_cast<double>(d[i]) - r[i]);
    c.max_abs_error = std::max(c.max_abs_error, err);
    c.max_rel_error = std::max(c.max_rel_error, err / std::max(std::fabs(r[i]), 1.0));
    if (!(err <= atol + rtol * std::fabs(r[i]))) ++c.mismatches;
  }
  if (d.size() != r.size())
    c.mismatches += d.size() > r.size() ? d.size() - r.size() : r.size() - d.size();
  return c;
}

}  // namespace neuronsim::reference
