#pragma once
// Max and average pooling over 1 to 3 spatial dims (the spatial dims PyTorch's op pools; an
// unbatched input is one image) and their backward, channels on SBUF partitions. The input band
// sits in SBUF padded (-inf for max, 0 for average); every window tap is one VectorE op over a
// strided window of it, as in the shifted convolution. Max pooling tracks the flat input index
// of the maximum (iota per tap, compare, select); the backward scatters each tap's share of the
// gradient into a zeroed input buffer (max: where the saved index matches the tap).
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// Per spatial dim (pooled dims only, outermost first): kernel, stride, padding, dilation.
/// The output extents come from the output tensor (ceil_mode is in them).
struct PoolSpec {
  bool max = true;
  int64_t dims = 2;  // pooled spatial dims (trailing dims of the input)
  std::array<int64_t, 3> kernel{1, 1, 1}, stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  bool count_include_pad = true;            // average: padding counts in the divisor
  std::optional<int64_t> divisor_override;  // average: a fixed divisor
};

/// out (and, for max, indices: the flat index into the pooled dims of the input) from input.
device_model::Program build_pooling(const std::string& name, const TensorDesc& input,
                                    const TensorDesc& out, const std::optional<TensorDesc>& indices,
                                    const PoolSpec& spec, const device_model::CoreParams& core);

/// grad_input from grad_out (and, for max, the saved indices).
device_model::Program build_pooling_backward(const std::string& name, const TensorDesc& grad_out,
                                             const std::optional<TensorDesc>& indices,
                                             const TensorDesc& grad_input, const PoolSpec& spec,
                                             const device_model::CoreParams& core);

/// Whether one image's padded input (per channel) fits SBUF for the backward, and the forward
/// can tile it; sizes as PyTorch gives them.
bool pooling_fits(const std::vector<int64_t>& input, const std::vector<int64_t>& out,
                  const PoolSpec& spec, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
