#pragma once
// What the group norm kernels (group_norm.h, and the channels-last forward they choose,
// group_norm_positions.h) take: the op's shape and its tensors.
#include <cstdint>
#include <optional>

#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// The op's shape arguments (native_group_norm's N, C, HxW, group).
struct GroupNormShape {
  int64_t N = 0, C = 0, HxW = 0, groups = 1;
};

/// in/out dense with N * C * HxW elements, each contiguous or channels-last ([N, HxW, C] in
/// memory); weight/bias [C]; mean/rstd [N, G] (dense).
struct GroupNormIo {
  TensorDesc in, out;
  std::optional<TensorDesc> weight, bias, mean, rstd;
  GroupNormShape shape;
  float eps = 1e-5f;
};

}  // namespace neuronsim::kernels
