#pragma once
// The reduced squared error of mse_loss: sum((a - b)^2) * scale into one element, an expression
// sum (expression_sum.h) of the squared difference.
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out (one element) = scale * sum over `sizes` of (a - b)^2.
device_model::Program build_squared_error_sum(const std::string& name, const TensorDesc& a,
                                              const TensorDesc& b, const TensorDesc& out,
                                              float scale, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
