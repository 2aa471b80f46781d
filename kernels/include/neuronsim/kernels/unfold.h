#pragma once
// unfold's backward: the windows' gradients summed back onto the positions they read. The
// gradient [outer, n, inner, size] (Tensor.unfold(dim, size, step) of an [outer, L, inner] input
// viewed that way) loads into SBUF rows (outer on partitions); the zeroed input gradient
// [L, inner] per row receives one VectorE add per window offset j (positions i * step + j of
// every window i, disjoint within one add), then is stored.
#include <array>
#include <cstdint>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// The op's geometry with every dim before `dim` merged into outer and every dim after it into
/// inner.
struct UnfoldShape {
  int64_t outer = 1, length = 1, inner = 1;  // the input: [outer, length, inner]
  int64_t windows = 0, size = 1, step = 1;   // n = windows of `size` elements, `step` apart
};

/// grad_in: [outer, n, inner, size] through `grad_strides` (outer, n, inner, size strides, in
/// elements); grad_input: contiguous [outer, length, inner].
device_model::Program build_unfold_backward(const std::string& name, const TensorDesc& grad_in,
                                            const std::array<int64_t, 4>& grad_strides,
                                            const TensorDesc& grad_input, const UnfoldShape& s,
                                            const device_model::CoreParams& core);

/// Whether one row's input gradient and windows fit SBUF (and VectorE's free size).
bool unfold_backward_fits(const UnfoldShape& s, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
