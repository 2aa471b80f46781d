// Convolution entry points: PyTorch's arguments -> the shifted-matmul program (forward,
// transposed forward, input gradient) or the weight/bias gradient programs (conv_shifted.h).
#include "neuronsim/kernels/convolution.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "conv_shifted.h"

namespace neuronsim::kernels {

using namespace device_model;

namespace {

// Argument x of spatial dim d (PyTorch allows one value for every dim).
int64_t arg(const std::vector<int64_t>& v, size_t d, int64_t fallback) {
  if (v.empty()) return fallback;
  return v.size() == 1 ? v[0] : v.at(d);
}

// The three axes of a convolution with input extents `in` and output extents `out` (5-d
// sizes), spatial dims right-aligned. `mode`: the program that reads this input.
enum class Mode { kForward, kSpread, kWeight };

conv::Axes make_axes(const std::vector<int64_t>& in5, const std::vector<int64_t>& out5,
                     const std::vector<int64_t>& w5, size_t nsp, const ConvSpec& s, Mode mode) {
  conv::Axes a;
  for (int x = 0; x < 3; ++x) {
    const int64_t sp = x - (3 - static_cast<int64_t>(nsp));
    if (sp < 0) continue;
    const size_t d = static_cast<size_t>(sp);
    const int64_t st = arg(s.stride, d, 1), p = arg(s.padding, d, 0), dl = arg(s.dilation, d, 1);
    const int64_t k = w5[2 + x];
    conv::Axis& ax = a[x];
    ax.in = in5[2 + x];
    ax.out = out5[2 + x];
    ax.kernel = k;
    ax.dilation = dl;
    if (mode == Mode::kSpread) {  // read the input spread by the stride, kernel flipped
      ax.stride = 1;
      ax.spread = st;
      ax.low = dl * (k - 1) - p;
    } else {
      ax.stride = st;
      ax.low = p;
    }
  }
  return a;
}

void check_positive(const ConvSpec& s, size_t nsp) {
  for (size_t d = 0; d < nsp; ++d) {
    if (arg(s.stride, d, 1) < 1 || arg(s.dilation, d, 1) < 1 || arg(s.padding, d, 0) < 0) {
      throw std::invalid_argument(
          "convolution: stride and dilation must be positive, padding "
          "non-negative");
    }
  }
  if (s.groups < 1) throw std::invalid_argument("convolution: groups must be positive");
}

// Output extents of a convolution of `in` (PyTorch's formulas).
int64_t out_extent(int64_t in, int64_t k, int64_t st, int64_t p, int64_t dl, int64_t op,
                   bool transposed) {
  if (transposed) return (in - 1) * st - 2 * p + dl * (k - 1) + op + 1;
  return (in + 2 * p - dl * (k - 1) - 1) / st + 1;
}

struct Shapes {
  TensorDesc x, w, y;  // 5-d: input, weight, output of the forward convolution
  size_t nsp = 0;
};

Shapes check_shapes(const std::string& name, const TensorDesc& x, const TensorDesc& w,
                    const TensorDesc& y, const ConvSpec& s) {
  Shapes sh{conv::to_5d(x), conv::to_5d(w), conv::to_5d(y), static_cast<size_t>(x.dim() - 2)};
  check_positive(s, sh.nsp);
  const int64_t G = s.groups;
  const int64_t cin = sh.x.sizes[1], cout = sh.y.sizes[1];
  const int64_t w_out = s.transposed ? sh.w.sizes[1] * G : sh.w.sizes[0];
  const int64_t w_in = s.transposed ? sh.w.sizes[0] : sh.w.sizes[1] * G;
  bool ok = w.dim() == x.dim() && y.dim() == x.dim() && w_out == cout && w_in == cin &&
            cin % G == 0 && cout % G == 0 && sh.x.sizes[0] == sh.y.sizes[0];
  for (size_t d = 0; ok && d < sh.nsp; ++d) {
    const size_t x5 = 2 + 3 - sh.nsp + d;
    ok = sh.y.sizes[x5] == out_extent(sh.x.sizes[x5], sh.w.sizes[x5], arg(s.stride, d, 1),
                                      arg(s.padding, d, 0), arg(s.dilation, d, 1),
                                      arg(s.output_padding, d, 0), s.transposed);
  }
  if (!ok) {
    throw std::invalid_argument(fmt::format(
        "{}: input {} and weight {} do not give output {} (stride {}, padding {}, dilation {}, "
        "groups {}{})",
        name, x.to_string(), w.to_string(), y.to_string(), s.stride, s.padding, s.dilation, G,
        s.transposed ? ", transposed" : ""));
  }
  return sh;
}

// out = conv(in) as the shifted program: the forward convolution of x, or the input gradient
// (in = grad_out, out = grad_input).
conv::ShiftedConv forward_conv(const Shapes& sh, const ConvSpec& s) {
  conv::ShiftedConv c;
  c.in = sh.x;
  c.weight = sh.w;
  c.out = sh.y;
  c.groups = s.groups;
  c.contraction_first = s.transposed;
  c.flip = s.transposed;
  c.axes = make_axes(sh.x.sizes, sh.y.sizes, sh.w.sizes, sh.nsp, s,
                     s.transposed ? Mode::kSpread : Mode::kForward);
  return c;
}

conv::ShiftedConv input_grad_conv(const Shapes& sh, const TensorDesc& go, const TensorDesc& gi,
                                  const ConvSpec& s) {
  conv::ShiftedConv c;
  c.in = go;
  c.weight = sh.w;
  c.out = gi;
  c.groups = s.groups;
  // The gradient of a convolution is the transposed convolution with its weight, and back.
  c.contraction_first = !s.transposed;
  c.flip = !s.transposed;
  c.axes = make_axes(go.sizes, gi.sizes, sh.w.sizes, sh.nsp, s,
                     s.transposed ? Mode::kForward : Mode::kSpread);
  return c;
}

conv::WeightGrad weight_grad(const Shapes& sh, const TensorDesc& go, const TensorDesc& x,
                             const TensorDesc& gw, const ConvSpec& s) {
  conv::WeightGrad w;
  w.groups = s.groups;
  w.dw = gw;
  // a: the operand whose channels index the weight's dim 0 (grad_out; x when transposed).
  w.a = s.transposed ? x : go;
  w.b = s.transposed ? go : x;
  w.axes = make_axes(w.b.sizes, w.a.sizes, sh.w.sizes, sh.nsp, s, Mode::kWeight);
  return w;
}

TensorDesc dense(DType t, const std::vector<int64_t>& sizes) {
  TensorDesc d;
  d.dtype = t;
  d.sizes = sizes;
  d.strides.assign(sizes.size(), 1);
  for (int64_t k = static_cast<int64_t>(sizes.size()) - 2; k >= 0; --k) {
    d.strides[k] = d.strides[k + 1] * std::max<int64_t>(sizes[k + 1], 1);
  }
  return d;
}

}  // namespace

Program build_convolution(const std::string& name, const TensorDesc& input,
                          const TensorDesc& weight, const std::optional<TensorDesc>& bias,
                          const TensorDesc& out, const ConvSpec& spec, const CoreParams& core) {
  const Shapes sh = check_shapes(name, input, weight, out, spec);
  conv::ShiftedConv c = forward_conv(sh, spec);
  c.bias = bias;
  return conv::build_shifted_conv(name, c, core);
}

std::vector<Program> build_convolution_backward(const std::string& name, const ConvBackwardIo& io,
                                                const ConvSpec& spec, const CoreParams& core) {
  const Shapes sh = check_shapes(name, io.input, io.weight, io.grad_out, spec);
  std::vector<Program> programs;
  if (io.grad_input) {
    programs.push_back(conv::build_shifted_conv(
        name + " (input)", input_grad_conv(sh, sh.y, conv::to_5d(*io.grad_input), spec), core));
  }
  if (io.grad_weight) {
    programs.push_back(conv::build_weight_grad(
        name + " (weight)", weight_grad(sh, sh.y, sh.x, conv::to_5d(*io.grad_weight), spec), core));
  }
  if (io.grad_bias) {
    programs.push_back(conv::build_bias_grad(name + " (bias)", sh.y, *io.grad_bias, core));
  }
  return programs;
}

bool convolution_fits(const std::vector<int64_t>& input, const std::vector<int64_t>& weight,
                      const std::vector<int64_t>& out, const ConvSpec& spec, DType dtype,
                      const CoreParams& core) {
  try {
    const Shapes sh = check_shapes("convolution", dense(dtype, input), dense(dtype, weight),
                                   dense(dtype, out), spec);
    if (sh.y.numel() == 0) return true;
    return conv::shifted_conv_band_rows(forward_conv(sh, spec), core) > 0 &&
           conv::shifted_conv_band_rows(input_grad_conv(sh, sh.y, sh.x, spec), core) > 0 &&
           conv::weight_grad_band_rows(weight_grad(sh, sh.y, sh.x, sh.w, spec), core) > 0;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace neuronsim::kernels
