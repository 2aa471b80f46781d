// upsample_nearest1d/2d/3d, upsample_bilinear2d and their backwards (F.interpolate's nearest and
// bilinear modes): the kernel library's upsampling, planes on partitions. Inputs whose (n, c)
// planes are one stride apart (contiguous, expanded) or whose rows are contiguous (channel
// slices: one DMA per run of planes within an n) and fit SBUF run native; channels_last and
// larger planes take the CPU fallback.
#include <stdexcept>

#include "neuronsim/kernels/upsample.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

bool is_backward(const OpCall& call) {
  return call.name().find("_backward") != std::string::npos;
}

// The spec of a call: spatial dims from the op's name, sizes from its arguments.
UpsampleSpec spec_of(const OpCall& call) {
  UpsampleSpec s;
  const std::string& name = call.name();
  s.linear = name.find("bilinear") != std::string::npos;
  s.dims = name.find("1d") != std::string::npos ? 1 : name.find("3d") != std::string::npos ? 3 : 2;
  const std::vector<int64_t> in =
      is_backward(call) ? call.ints("input_size") : call.tensor(0).sizes();
  const std::vector<int64_t> out = call.ints("output_size");
  if (static_cast<int64_t>(in.size()) != s.dims + 2 || static_cast<int64_t>(out.size()) != s.dims)
    throw std::invalid_argument(name + ": sizes do not match the op's dims");
  s.planes = in[0] * in[1];
  static const char* const names[3][3] = {
      {"scales", "", ""}, {"scales_h", "scales_w", ""}, {"scales_d", "scales_h", "scales_w"}};
  for (int64_t d = 0; d < s.dims; ++d) {
    s.in[d] = in[2 + d];
    s.out[d] = out[d];
    const char* n = names[s.dims - 1][d];
    if (call.has(n)) s.scales[d] = call.number(n, 0.0);
  }
  if (s.linear) s.align_corners = call.boolean("align_corners", false);
  return s;
}

Programs build(const OpCall& call) {
  const UpsampleSpec s = spec_of(call);
  if (is_backward(call)) {
    return {build_upsample_backward(call.name(), call.tensor(0).desc, call.output(0).desc, s,
                                    call.core())};
  }
  return {build_upsample(call.name(), call.tensor(0).desc, call.output(0).desc, s, call.core())};
}

bool supported(const OpCall& call) {
  const TensorArg x = call.tensor(0);
  // Planes one stride apart, or runs of them per n (channel slices) whose rows are contiguous;
  // channels_last (element-strided rows) takes the fallback.
  auto mergeable = [](const TensorArg& t) {
    std::vector<int64_t> strides;
    for (int64_t d = 0; d < t.dim(); ++d) strides.push_back(t.stride(d));
    return upsample_planes_mergeable(t.sizes(), strides) || (t.dim() >= 3 && t.stride(-1) == 1);
  };
  if (!x.defined || !x.is_floating() || !mergeable(x)) return false;
  for (const char* n : {"out", "grad_input"}) {
    if (call.kind(n) != ArgKind::kTensor) continue;
    const TensorArg t = call.tensor(n);
    if (t.numel() > 0 && !mergeable(t)) return false;
  }
  UpsampleSpec s;
  try {
    s = spec_of(call);
  } catch (const std::invalid_argument&) {
    return false;  // the CPU kernel reports the bad sizes
  }
  int64_t numel = s.planes;
  for (int64_t d = 0; d < s.dims; ++d) numel *= is_backward(call) ? s.out[d] : s.in[d];
  if (static_cast<int64_t>(x.numel()) != numel || x.dim() != s.dims + 2) return false;
  return upsample_fits(s, call.core());
}

}  // namespace

std::vector<OpRule> upsample_rules() {
  std::vector<OpRule> ops;
  for (const char* name :
       {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
        "aten::upsample_bilinear2d", "aten::upsample_nearest1d_backward",
        "aten::upsample_nearest2d_backward", "aten::upsample_nearest3d_backward",
        "aten::upsample_bilinear2d_backward"}) {
    OpRule r;
    r.name = name;
    r.build = build;
    r.supports = supported;
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
