#pragma once
// Nearest (1-3 spatial dims) and bilinear (2-d) upsampling and their backwards over contiguous
// [N, C, *spatial] tensors: planes (n, c) on SBUF partitions, each plane whole on the free axis.
// The forward expands one spatial dim at a time, innermost first: the output positions of a dim
// that read the same input position form runs, runs of equal length whose sources advance
// evenly form a segment, and each segment is one VectorE copy with a stride-0 (repeating)
// source. Bilinear gathers both taps that way and blends them with per-position weights the
// device computes from an iota (PyTorch's source-index formula in fp32). The backwards reduce
// each segment's runs back onto their sources, outermost dim first.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct UpsampleSpec {
  int64_t dims = 2;     // spatial dims (1 to 3; bilinear: 2)
  bool linear = false;  // bilinear instead of nearest
  bool align_corners = false;
  int64_t planes = 1;                                // N * C
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1};  // spatial extents, outermost first
  std::array<std::optional<double>, 3> scales;       // the op's scale arguments, per dim
};

/// Whether an [N, C, *spatial] layout's (n, c) planes are one stride apart (any strides within a
/// plane): contiguous tensors, expanded gradients (stride 0), slices along N or C.
bool upsample_planes_mergeable(const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides);

/// out from input.
device_model::Program build_upsample(const std::string& name, const TensorDesc& input,
                                     const TensorDesc& out, const UpsampleSpec& spec,
                                     const device_model::CoreParams& core);
/// grad_input from grad_out.
device_model::Program build_upsample_backward(const std::string& name, const TensorDesc& grad_out,
                                              const TensorDesc& grad_input,
                                              const UpsampleSpec& spec,
                                              const device_model::CoreParams& core);
/// Whether a plane's input, output and intermediates fit SBUF (and VectorE's free size).
bool upsample_fits(const UpsampleSpec& spec, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
