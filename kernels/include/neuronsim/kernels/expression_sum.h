#pragma once
// The reduced losses (binary_cross_entropy, smooth_l1, huber with reduction mean or sum): an
// elementwise expression over broadcast operands, summed into one element and scaled. Each tile
// of the operands is evaluated step by step in SBUF (VectorE ALU and select steps, ScalarE
// activations), its values summed along the free axis into a per-partition accumulator, and
// at the end the [P, 1] accumulator is transposed on TensorE and its row summed, as the
// squared-error sum of mse_loss does.
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out (one element) = scale * sum over the broadcast shape of `inputs` of expr's last step.
device_model::Program build_expression_sum(const std::string& name,
                                           const std::vector<TensorDesc>& inputs, const Expr& expr,
                                           const TensorDesc& out, float scale,
                                           const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
