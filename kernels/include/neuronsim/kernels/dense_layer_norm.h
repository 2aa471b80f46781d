#pragma once
// y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over the last dimension of a dense
// [rows, dim] tensor at fixed HBM addresses (the demo's and benchmarks' form): a thin adapter over
// build_layer_norm (layer_norm.h), the one layer-norm kernel, as gemm.h is over build_matmul.
#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels {

struct LayerNormSpec {
  uint32_t rows = 0, dim = 0;
  device_model::DType dtype = device_model::DType::kBf16;  // x, gamma, beta and y
  float eps = 1e-5f;
};

struct LayerNormAddresses {
  uint64_t x = 0, gamma = 0, beta = 0, y = 0;
};

device_model::Program build_layernorm(const LayerNormSpec& spec, const LayerNormAddresses& addr,
                                      const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
