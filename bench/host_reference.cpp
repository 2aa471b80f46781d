#include "host_reference.h"

#include <cmath>
#include <map>
#include <random>

#include <Eigen/Dense>

namespace neuronsim::bench {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

RowMatrix random_matrix(Eigen::Index rows, Eigen::Index cols, uint64_t seed, float stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  RowMatrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

struct GemmOperands {
  RowMatrix a, b, bias, c;
};

// Inputs are made once per size, outside the timed calls.
GemmOperands& gemm_operands(uint32_t n) {
  static std::map<uint32_t, GemmOperands> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    GemmOperands o{random_matrix(n, n, 1, 1.0f), random_matrix(n, n, 2, 0.05f),
                   random_matrix(1, n, 3, 1.0f), RowMatrix(n, n)};
    it = cache.emplace(n, std::move(o)).first;
  }
  return it->second;
}

float gelu(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

double bias_gelu_checksum(RowMatrix& c, const RowMatrix& bias) {
  double sum = 0;
  for (Eigen::Index i = 0; i < c.rows(); ++i) {
    float* row = c.row(i).data();
    for (Eigen::Index j = 0; j < c.cols(); ++j) {
      row[j] = gelu(row[j] + bias(0, j));
      sum += row[j];
    }
  }
  return sum;
}

}  // namespace

double eigen_gemm_bias_gelu(uint32_t size) {
  GemmOperands& o = gemm_operands(size);
  o.c.noalias() = o.a * o.b;
  return bias_gelu_checksum(o.c, o.bias);
}

double naive_gemm_bias_gelu(uint32_t size) {
  GemmOperands& o = gemm_operands(size);
  const Eigen::Index n = size;
  o.c.setZero();
  for (Eigen::Index i = 0; i < n; ++i) {
    float* crow = o.c.row(i).data();
    for (Eigen::Index k = 0; k < n; ++k) {
      const float a = o.a(i, k);
      const float* brow = o.b.row(k).data();
      for (Eigen::Index j = 0; j < n; ++j) crow[j] += a * brow[j];
    }
  }
  return bias_gelu_checksum(o.c, o.bias);
}

double eigen_layernorm(uint32_t rows, uint32_t dim) {
  struct Operands {
    RowMatrix x, gamma, beta, y;
  };
  static std::map<std::pair<uint32_t, uint32_t>, Operands> cache;
  auto it = cache.find({rows, dim});
  if (it == cache.end()) {
    Operands o{random_matrix(rows, dim, 4, 1.0f), random_matrix(1, dim, 5, 1.0f),
               random_matrix(1, dim, 6, 1.0f), RowMatrix(rows, dim)};
    it = cache.emplace(std::make_pair(rows, dim), std::move(o)).first;
  }
  Operands& o = it->second;
  const float eps = 1e-5f;
  Eigen::VectorXf mean = o.x.rowwise().mean();
  o.y = o.x.colwise() - mean;
  Eigen::VectorXf rstd =
      ((o.y.array().square().rowwise().sum() / static_cast<float>(dim)) + eps).rsqrt();
  o.y.array().colwise() *= rstd.array();
  o.y.array().rowwise() *= o.gamma.array().row(0);
  o.y.array().rowwise() += o.beta.array().row(0);
  return static_cast<double>(o.y.sum());
}

}  // namespace neuronsim::bench
