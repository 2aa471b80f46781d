#pragma once
// Group norm over a contiguous [N, C, HxW] tensor (HxW: the spatial dims flattened): rows (n, g)
// on SBUF partitions, each row's C/G x HxW elements on the free axis, streamed in chunks that
// split a channel only when one channel alone does not fit (a row that fits is loaded once).
// Tiles hold whole images (P / G of them), so every tile puts channel (g, j) in the same
// partition and column: weight and bias are loaded once as [G, C/G] and broadcast to a tile's
// rows by a TensorE matmul with a 0/1 selection matrix built by iota. The backward reduces
// sum(dy * x) and sum(dy) per (n, c), then writes dx in a second pass; the weight and bias
// gradients sum the per-(n, c) terms over the images of each tile with the selection matrix on
// TensorE. Channels-last data ([N, HxW, C] in memory: what convolutions and Diffusers' attention
// blocks hand back): a forward with input and output channels-last whose image fits in SBUF
// puts positions on partitions instead (group_norm_positions.h); otherwise the same rows, each
// image's G rows one DMA of runs of C/G contiguous channels. When the input is channels-last a
// row's chunk holds whole positions (position outer, channel inner) and the per-channel arrays are
// read with the channel stride innermost. Each tensor's layout is its own (read from its strides):
// one in the other layout than the input (a contiguous gradient of a channels-last input) moves
// element by element.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/group_norm_io.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

device_model::Program build_group_norm(const std::string& name, const GroupNormIo& io,
                                       const device_model::CoreParams& core);

/// grad_out/in/grad_in dense like the forward's input (each in either layout); mean/rstd [N, G].
struct GroupNormBackwardIo {
  TensorDesc grad_out, in, mean, rstd;
  std::optional<TensorDesc> weight, grad_in, grad_weight, grad_bias;
  GroupNormShape shape;
};
device_model::Program build_group_norm_backward(const std::string& name,
                                                const GroupNormBackwardIo& io,
                                                const device_model::CoreParams& core);

/// Whether the kernels take this shape: at most one partition tile of groups, C divisible by
/// G, and the per-channel columns of a tile fit beside the streamed chunks.
bool group_norm_fits(const GroupNormShape& s, const device_model::CoreParams& core);

/// Whether a tensor of `sizes` [N, C, *spatial] with `strides` is channels-last dense ([N, HxW,
/// C] in memory, as torch.channels_last / channels_last_3d store it). A tensor that is also
/// contiguous (one channel, or one position) counts as contiguous.
bool group_norm_channels_last(const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides);

}  // namespace neuronsim::kernels
