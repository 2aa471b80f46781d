#pragma once
// nll_loss forward and backward. The caller resolves the targets into element positions on the
// host (as the runtime's descriptor generation would for an index input): for each row i, the
// position of self[i, target[i]] and of weight[target[i]], or -1 where target[i] is
// ignore_index. Rows lie along the free dimension of one partition in chunks: the picked
// log-probabilities and weights are gathered by one-element DMAs into SBUF (ignored rows stay 0),
// VectorE forms -w * x and, for the reductions, sums it and the weights (total_weight) and
// divides for the mean.
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct NllLossSpec {
  std::vector<int64_t> self_pos;    // per row: element position in self, -1 if ignored
  std::vector<int64_t> weight_pos;  // per row: position in weight (empty: unweighted)
  int reduction = 1;                // 0 none (per-row output), 1 mean, 2 sum
};

/// Forward: `out` has one element per row (reduction none with a batch) or one element (the sum,
/// or the mean: sum / total_weight, NaN when every row is ignored); `total_weight` (one element)
/// is the sum of the picked weights, or 0 for a per-row output (as the CPU kernel writes).
device_model::Program build_nll_loss(const std::string& name, const TensorDesc& self,
                                     const TensorDesc* weight, const TensorDesc& out,
                                     const TensorDesc& total_weight, const NllLossSpec& spec,
                                     const device_model::CoreParams& core);

/// Backward into a grad_input already zeroed: grad_input[self_pos[i]] = -w[i] * g, where g is
/// grad_output[i] (per-row grad_output, reduction none with a batch) or the one grad_output
/// element, divided by total_weight for the mean.
device_model::Program build_nll_loss_backward(const std::string& name,
                                              const TensorDesc& grad_output,
                                              const TensorDesc* weight,
                                              const TensorDesc& total_weight,
                                              const TensorDesc& grad_input, const NllLossSpec& spec,
                                              const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
