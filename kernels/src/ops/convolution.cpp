// convolution and convolution_backward: the kernel library's shifted-matmul convolutions on
// TensorE (registered for the device by backend/aten/convolution.cpp, as ATen has no CPU kernel
// of their own).
#include <optional>

#include "neuronsim/kernels/convolution.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

ConvSpec spec_of(const OpCall& call) {
  ConvSpec s;
  s.stride = call.ints("stride");
  s.padding = call.ints("padding");
  s.dilation = call.ints("dilation");
  s.output_padding = call.ints("output_padding");
  s.transposed = call.boolean("transposed", false);
  s.groups = call.integer("groups", 1);
  return s;
}

// TensorE multiplies floating-point data; the shapes must tile into SBUF.
bool supported(const OpCall& call, const TensorArg& input, const TensorArg& weight,
               const std::vector<int64_t>& out) {
  for (const TensorArg& t : {input, weight}) {
    if (!t.defined || !t.is_floating()) return false;
  }
  if (input.dim() < 3 || input.dim() > 5) return false;
  if (input.type != weight.type) return false;
  const auto dt = device_dtype(input.type);
  return dt &&
         convolution_fits(input.sizes(), weight.sizes(), out, spec_of(call), *dt, call.core());
}

// The forward output's sizes (PyTorch's formula), for the support check that runs before it.
std::vector<int64_t> conv_out_sizes(const OpCall& call, const TensorArg& x, const TensorArg& w) {
  const ConvSpec s = spec_of(call);
  auto at_d = [](const std::vector<int64_t>& v, size_t d, int64_t f) {
    return v.empty() ? f : (v.size() == 1 ? v[0] : v.at(d));
  };
  std::vector<int64_t> out{x.size(0), s.transposed ? w.size(1) * s.groups : w.size(0)};
  for (int64_t d = 2; d < x.dim(); ++d) {
    const size_t i = static_cast<size_t>(d - 2);
    const int64_t st = at_d(s.stride, i, 1), p = at_d(s.padding, i, 0), dl = at_d(s.dilation, i, 1),
                  k = w.size(d);
    out.push_back(s.transposed ? (x.size(d) - 1) * st - 2 * p + dl * (k - 1) +
                                     at_d(s.output_padding, i, 0) + 1
                               : (x.size(d) + 2 * p - dl * (k - 1) - 1) / st + 1);
  }
  return out;
}

}  // namespace

std::vector<OpRule> convolution_rules() {
  OpRule fwd;
  fwd.name = "aten::convolution";
  fwd.build = [](const OpCall& call) {
    std::optional<TensorDesc> bias;
    if (call.has("bias")) bias = call.tensor("bias").desc;
    return Programs{build_convolution(call.name(), call.tensor(0).desc, call.tensor(1).desc, bias,
                                      call.output(0).desc, spec_of(call), call.core())};
  };
  fwd.supports = [](const OpCall& call) {
    const TensorArg x = call.tensor(0), w = call.tensor(1);
    if (!x.defined || !w.defined || x.dim() != w.dim()) return false;
    if (call.has("bias") && !call.tensor("bias").is_floating()) return false;
    return supported(call, x, w, conv_out_sizes(call, x, w));
  };

  OpRule bwd;
  bwd.name = "aten::convolution_backward";
  bwd.build = [](const OpCall& call) {
    ConvBackwardIo io;
    io.grad_out = call.tensor(0).desc;
    io.input = call.tensor(1).desc;
    io.weight = call.tensor(2).desc;
    auto out = [&](size_t i) -> std::optional<TensorDesc> {
      if (i < call.num_outputs() && call.output(i).defined) return call.output(i).desc;
      return std::nullopt;
    };
    io.grad_input = out(0);
    io.grad_weight = out(1);
    io.grad_bias = out(2);
    return build_convolution_backward(call.name(), io, spec_of(call), call.core());
  };
  bwd.supports = [](const OpCall& call) {
    const TensorArg g = call.tensor(0);
    return g.defined && g.is_floating() &&
           supported(call, call.tensor(1), call.tensor(2), g.sizes());
  };
  return {fwd, bwd};
}

}  // namespace neuronsim::kernels::ops
