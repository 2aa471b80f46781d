#pragma once
// C = A @ B in SCALE-Sim's weight-stationary dataflow (scalesim compute/systolic_compute_ws.py),
// for comparing the two simulators: SCALE-Sim's GEMM M x K times K x N, its filters B
// stationary, its ifmap rows (A, M of them) streamed. Fold by fold: TensorE loads B's tile
// [128 k, 128 n] once and streams all M rows of A^T past it in moving tiles of up to 512
// before the next fold. The result is written transposed, C^T [n, m] (the PE array's output
// layout); partial sums accumulate in PSUM, or in SBUF on VectorE when M needs more than the
// PSUM banks. It is not the fast kernel (see matmul.h): SCALE-Sim's order reloads A for every
// column of B's tiles.
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/dense_gemm.h"

namespace neuronsim::kernels {

/// `addr.c` receives C^T [n, m]; spec.bias and spec.epilogue are not supported (plain C = AB).
/// Throws std::invalid_argument when a row of A^T does not fit in SBUF.
device_model::Program build_gemm_weight_stationary(const GemmSpec& spec, const GemmAddresses& addr,
                                                   const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
