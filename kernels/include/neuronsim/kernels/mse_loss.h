#pragma once
// The reduced squared error of mse_loss: sum((a - b)^2) * scale into one element. The operands
// are tiled onto partitions (broadcast strides allowed); each tile's squared differences are
// summed along the free axis into a per-partition accumulator on VectorE, and at the end the
// [P, 1] accumulator is transposed on TensorE and its row summed.
#include <string>

#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out (one element) = scale * sum over `sizes` of (a - b)^2.
device::Program build_squared_error_sum(const std::string& name, const TensorDesc& a,
                                        const TensorDesc& b, const TensorDesc& out, float scale,
                                        const device::CoreParams& core);

}  // namespace neuronsim::kernels
