#pragma once
// C[m, n] = epilogue(A[m, k] @ B[k, n] + bias[n]) as a tiled NeuronCore program.
//
// A is given transposed (A^T, [k, m] row-major) as NKI's matmul does: contraction runs along the
// SBUF partitions of both operands. Tiling: K in 128-row tiles, M in 128-column stationary
// tiles, N in 512-wide moving tiles (one PSUM bank of fp32). A^T stays resident in SBUF per
// M block, B streams through two buffers, PSUM rotates over four banks, and the epilogue
// (VectorE bias add, ScalarE activation) and the stores overlap the next tile's matmuls.
#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels {

struct GemmSpec {
  uint32_t m = 0, k = 0, n = 0;
  device_model::DType in_dtype = device_model::DType::kBf16;
  device_model::DType out_dtype = device_model::DType::kBf16;
  bool bias = false;
  device_model::ActFunc epilogue = device_model::ActFunc::kCopy;
};

/// HBM byte addresses of the operands.
struct GemmAddresses {
  uint64_t a_t = 0;   // [k, m] of in_dtype
  uint64_t b = 0;     // [k, n] of in_dtype
  uint64_t bias = 0;  // [n] of in_dtype (when spec.bias)
  uint64_t c = 0;     // [m, n] of out_dtype
};

/// Throws std::invalid_argument for shapes the tiling cannot hold in SBUF.
device_model::Program build_gemm(const GemmSpec& spec, const GemmAddresses& addr,
                                 const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
