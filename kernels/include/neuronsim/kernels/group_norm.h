#pragma once
// Group norm over a contiguous [N, C, HxW] tensor (HxW: the spatial dims flattened): rows (n, g)
// on SBUF partitions, each row's C/G x HxW elements on the free axis, streamed in chunks that
// split a channel only when one channel alone does not fit (a row that fits is loaded once).
// Tiles hold whole images (P / G of them), so every tile puts channel (g, j) in the same
// partition and column: weight and bias are loaded once as [G, C/G] and broadcast to a tile's
// rows by a TensorE matmul with a 0/1 selection matrix built by iota. The backward reduces
// sum(dy * x) and sum(dy) per (n, c), then writes dx in a second pass; the weight and bias
// gradients sum the per-(n, c) terms over the images of each tile with the selection matrix on
// TensorE.
#include <cstdint>
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// The op's shape arguments (native_group_norm's N, C, HxW, group).
struct GroupNormShape {
  int64_t N = 0, C = 0, HxW = 0, groups = 1;
};

/// in/out contiguous with N * C * HxW elements; weight/bias [C]; mean/rstd [N, G] (dense).
struct GroupNormIo {
  TensorDesc in, out;
  std::optional<TensorDesc> weight, bias, mean, rstd;
  GroupNormShape shape;
  float eps = 1e-5f;
};
device_model::Program build_group_norm(const std::string& name, const GroupNormIo& io,
                                       const device_model::CoreParams& core);

/// grad_out/in/grad_in contiguous like the forward's input; mean/rstd [N, G].
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

}  // namespace neuronsim::kernels
