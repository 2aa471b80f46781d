#pragma once
// Convolutions (1-d, 2-d, 3-d; groups, stride, padding, dilation, transposed) and their backward
// on TensorE without im2col, the way NKI conv kernels run: the input channels sit on the SBUF
// partitions as a zero-padded band of the feature map, and every kernel tap is one matmul whose
// moving operand is a strided window of that band, all taps accumulating into one PSUM tile of
// output positions. When the contraction channels fill less than half the PE rows, copies of the
// band shifted by one tap stack on the free partitions so one matmul contracts several taps.
// Groups that are narrower than the PE array pack into block-diagonal weights.
//
// Transposed convolutions (and the input gradient of a convolution) run the same program over
// the input spread by the stride (zeros between elements) with the kernel flipped. The weight
// gradient contracts over output positions: both operands are transposed to position-major
// tiles on TensorE, one matmul per tap accumulating over images and position blocks (per R taps
// when a block of at most 64 channels stacks shifted copies of its band on the partitions).
// Bands of output rows halve until they fit SBUF; rows too wide for that split into column
// tiles.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// PyTorch's convolution arguments, one entry per spatial dim.
struct ConvSpec {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

/// out = conv(input, weight) + bias: input [N, C_in, *spatial], weight [C_out, C_in / groups, *k]
/// ([C_in, C_out / groups, *k] when transposed), bias [C_out], out [N, C_out, *spatial_out].
/// Throws std::invalid_argument on inconsistent shapes or a band that cannot fit SBUF.
device_model::Program build_convolution(const std::string& name, const TensorDesc& input,
                                        const TensorDesc& weight,
                                        const std::optional<TensorDesc>& bias,
                                        const TensorDesc& out, const ConvSpec& spec,
                                        const device_model::CoreParams& core);

struct ConvBackwardIo {
  TensorDesc grad_out, input, weight;
  std::optional<TensorDesc> grad_input, grad_weight, grad_bias;
};

/// convolution_backward: one program per requested gradient (input, weight, bias).
std::vector<device_model::Program> build_convolution_backward(const std::string& name,
                                                              const ConvBackwardIo& io,
                                                              const ConvSpec& spec,
                                                              const device_model::CoreParams& core);

/// Whether the programs above can tile this convolution (forward, input and weight gradients:
/// their weights and a one-row, column-tiled band fit SBUF); sizes as PyTorch gives them
/// (input, weight, output).
bool convolution_fits(const std::vector<int64_t>& input, const std::vector<int64_t>& weight,
                      const std::vector<int64_t>& out, const ConvSpec& spec,
                      device_model::DType dtype, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
