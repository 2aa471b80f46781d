#pragma once
// The shifted-matmul convolution program (private to the kernel library): out[n, co, o] =
// sum over contraction channels ck and taps k of w(ck, co, k) * buffer[n, ck, o * stride +
// k * dilation] (+ bias[co]), the buffer being the zero-padded (and possibly spread) input.
// Forward convolutions, transposed convolutions and input gradients are all this program.
#include <optional>
#include <string>

#include "conv_band.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels::conv {

struct ShiftedConv {
  TensorDesc in;      // [N, Ck, i0, i1, i2]
  TensorDesc weight;  // [Co, Ck / groups, k...] or, contraction_first, [Ck, Co / groups, k...]
  TensorDesc out;     // [N, Co, o0, o1, o2]
  std::optional<TensorDesc> bias;  // [Co]
  bool contraction_first = false;
  bool flip = false;  // tap k reads kernel element kernel - 1 - k on every axis
  Axes axes;
  int64_t groups = 1;
};

device_model::Program build_shifted_conv(const std::string& name, const ShiftedConv& c,
                                         const device_model::CoreParams& core);

/// Output rows per band so that one block of channels fits SBUF; 0 when not even one does.
int64_t shifted_conv_band_rows(const ShiftedConv& c, const device_model::CoreParams& core);

/// The weight gradient: dw[a, b, k] = sum over n and positions o of
/// a_t[n, a, o] * buffer(b_t)[n, b, o * stride + k * dilation] (a and b in the same group),
/// axes as seen from a_t (out = a_t's extents, in = b_t's).
struct WeightGrad {
  TensorDesc a, b;  // [N, Ca, o...], [N, Cb, i...]
  TensorDesc dw;    // [Ca, Cb / groups, k...]
  Axes axes;
  int64_t groups = 1;
};
device_model::Program build_weight_grad(const std::string& name, const WeightGrad& w,
                                        const device_model::CoreParams& core);
int64_t weight_grad_band_rows(const WeightGrad& w, const device_model::CoreParams& core);

/// grad_bias[c] = sum over n and positions of g[n, c, ...].
device_model::Program build_bias_grad(const std::string& name, const TensorDesc& g,
                                      const TensorDesc& grad_bias,
                                      const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::conv
