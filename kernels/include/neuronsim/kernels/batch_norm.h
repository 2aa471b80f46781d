#pragma once
// Batch norm over the channel dim (dim 1) of a [N, C, *spatial] tensor (0 to 3 spatial dims):
// channels on SBUF partitions, every channel's N x spatial elements on the free axis, streamed in
// chunks (loaded once when a channel block fits SBUF). Training computes the batch statistics
// (two passes: mean, then squares around it) and updates the running statistics in place; eval
// normalises with the running statistics. The backward reduces sum(g) and sum(g * (x - mean))
// per channel, then writes the input gradient in a second pass.
#include <optional>
#include <string>

#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// weight/bias/running stats/save stats are [C]. save_mean/save_invstd are written when given
/// (training); the running statistics are updated when given and training, read in eval.
struct BatchNormIo {
  TensorDesc in, out;
  std::optional<TensorDesc> weight, bias, running_mean, running_var, save_mean, save_invstd;
  bool training = true;
  float momentum = 0.1f, eps = 1e-5f;
};
device::Program build_batch_norm(const std::string& name, const BatchNormIo& io,
                                 const device::CoreParams& core);

/// Training: mean/invstd are save_mean/save_invstd. Eval: running_mean and running_var (invstd
/// = 1 / sqrt(running_var + eps)).
struct BatchNormBackwardIo {
  TensorDesc grad_out, in;
  std::optional<TensorDesc> weight, running_mean, running_var, save_mean, save_invstd;
  std::optional<TensorDesc> grad_in, grad_weight, grad_bias;
  bool training = true;
  float eps = 1e-5f;
};
device::Program build_batch_norm_backward(const std::string& name, const BatchNormBackwardIo& io,
                                          const device::CoreParams& core);

}  // namespace neuronsim::kernels
