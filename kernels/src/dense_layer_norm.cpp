#include "neuronsim/kernels/dense_layer_norm.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/kernels/layer_norm.h"

namespace neuronsim::kernels {

using namespace device_model;

Program build_layernorm(const LayerNormSpec& s, const LayerNormAddresses& addr,
                        const CoreParams& core) {
  if (s.rows == 0 || s.dim == 0) throw std::invalid_argument("layernorm: empty shape");
  const int64_t rows = s.rows, dim = s.dim;
  LayerNormIo io;
  io.in = TensorDesc{addr.x, s.dtype, {rows, dim}, {dim, 1}};
  io.out = TensorDesc{addr.y, s.dtype, {rows, dim}, {dim, 1}};
  io.weight = TensorDesc{addr.gamma, s.dtype, {dim}, {1}};
  io.bias = TensorDesc{addr.beta, s.dtype, {dim}, {1}};
  io.eps = s.eps;
  Program p = build_layer_norm(fmt::format("layernorm_{}x{}", s.rows, s.dim), io, core);
  const uint64_t es = dtype_size(s.dtype);
  p.hbm_regions = {{"x", addr.x, uint64_t{s.rows} * s.dim * es},
                   {"gamma", addr.gamma, uint64_t{s.dim} * es},
                   {"beta", addr.beta, uint64_t{s.dim} * es},
                   {"y", addr.y, uint64_t{s.rows} * s.dim * es}};
  return p;
}

}  // namespace neuronsim::kernels
