#pragma once
// Batch norm over the channel dim (dim 1) of a [N, C, *spatial] tensor (0 to 3 spatial dims):
// channels on SBUF partitions, every channel's N x spatial elements on the free axis, streamed in
// chunks (loaded once when a channel block fits SBUF). Training computes the batch statistics
// (two passes: mean, then squares around it) and updates the running statistics in place; eval
// normalises with the running statistics. The backward reduces sum(g) and sum(g * (x - mean))
// per channel, then writes the input gradient in a second pass.
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
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
device_model::Program build_batch_norm(const std::string& name, const BatchNormIo& io,
                                       const device_model::CoreParams& core);

/// Training: mean/invstd are save_mean/save_invstd. Eval: running_mean and running_var (invstd
/// = 1 / sqrt(running_var + eps)).
struct BatchNormBackwardIo {
  TensorDesc grad_out, in;
  std::optional<TensorDesc> weight, running_mean, running_var, save_mean, save_invstd;
  std::optional<TensorDesc> grad_in, grad_weight, grad_bias;
  bool training = true;
  float eps = 1e-5f;
};
device_model::Program build_batch_norm_backward(const std::string& name,
                                                const BatchNormBackwardIo& io,
                                                const device_model::CoreParams& core);

/// nn.SyncBatchNorm's ops, which PyTorch implements for CUDA only (batch_norm_stats,
/// batch_norm_gather_stats_with_counts, batch_norm_elemt, batch_norm_backward_reduce,
/// batch_norm_backward_elemt): the phases of the two programs above run apart, with the
/// statistics crossing ranks (an all-gather, an all-reduce) in between. Channels on partitions,
/// as above; every [C] vector one element per partition.

/// The training statistics: mean and invstd = 1 / sqrt(biased var + eps), written to [C].
struct BatchNormStatsIo {
  TensorDesc in, mean, invstd;
  float eps = 1e-5f;
};
device_model::Program build_batch_norm_stats(const std::string& name, const BatchNormStatsIo& io,
                                             const device_model::CoreParams& core);

/// W ranks' statistics ([W, C] mean and invstd, [W] element counts) combined per channel into
/// the global mean and invstd; the running statistics (unbiased variance) updated when given.
struct BatchNormGatherStatsIo {
  TensorDesc mean_all, invstd_all, counts, mean, invstd;
  std::optional<TensorDesc> running_mean, running_var;
  float momentum = 0.1f, eps = 1e-5f;
};
device_model::Program build_batch_norm_gather_stats(const std::string& name,
                                                    const BatchNormGatherStatsIo& io,
                                                    const device_model::CoreParams& core);

/// out = (x - mean) * invstd * weight + bias with given [C] statistics.
struct BatchNormElemtIo {
  TensorDesc in, out, mean, invstd;
  std::optional<TensorDesc> weight, bias;
};
device_model::Program build_batch_norm_elemt(const std::string& name, const BatchNormElemtIo& io,
                                             const device_model::CoreParams& core);

/// Per channel sum(g) and sum(g * (x - mean)) (this rank's part, written when given), and from
/// them grad_weight = sum(g * (x - mean)) * invstd and grad_bias = sum(g).
struct BatchNormBackwardReduceIo {
  TensorDesc grad_out, in, mean, invstd;
  std::optional<TensorDesc> sum_dy, sum_dy_xmu, grad_weight, grad_bias;
};
device_model::Program build_batch_norm_backward_reduce(const std::string& name,
                                                       const BatchNormBackwardReduceIo& io,
                                                       const device_model::CoreParams& core);

/// grad_in = (g - sum_dy / N - (x - mean) * invstd^2 * sum_dy_xmu / N) * invstd * weight from
/// the all-reduced sums; N (`count`, every rank's elements per channel) is an immediate.
struct BatchNormBackwardElemtIo {
  TensorDesc grad_out, in, mean, invstd, sum_dy, sum_dy_xmu, grad_in;
  std::optional<TensorDesc> weight;
  float count = 1.0f;
};
device_model::Program build_batch_norm_backward_elemt(const std::string& name,
                                                      const BatchNormBackwardElemtIo& io,
                                                      const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
