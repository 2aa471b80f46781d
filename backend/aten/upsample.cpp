// upsample_nearest1d/2d/3d, upsample_bilinear2d and their backwards (F.interpolate's nearest and
// bilinear modes): the kernel library's upsampling, planes on partitions. Inputs whose (n, c)
// planes are one stride apart (contiguous, expanded) or whose rows are contiguous (channel
// slices: one DMA per run of planes within an n) and fit SBUF run native; channels_last and
// larger planes take the CPU fallback.
#include <ATen/ATen.h>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/upsample.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

bool is_backward(const OpInvocation& inv) {
  return inv.name.find("_backward") != std::string::npos;
}

// The spec of a call: spatial dims from the op's name, sizes from its arguments.
kernels::UpsampleSpec spec_of(const OpInvocation& inv) {
  kernels::UpsampleSpec s;
  s.linear = inv.name.find("bilinear") != std::string::npos;
  s.dims = inv.name.find("1d") != std::string::npos   ? 1
           : inv.name.find("3d") != std::string::npos ? 3
                                                      : 2;
  const std::vector<int64_t> in =
      is_backward(inv) ? inv.ints("input_size") : inv.tensor(0).sizes().vec();
  const std::vector<int64_t> out = inv.ints("output_size");
  if (static_cast<int64_t>(in.size()) != s.dims + 2 || static_cast<int64_t>(out.size()) != s.dims)
    throw std::invalid_argument(inv.name + ": sizes do not match the op's dims");
  s.planes = in[0] * in[1];
  static const char* const names[3][3] = {
      {"scales", "", ""}, {"scales_h", "scales_w", ""}, {"scales_d", "scales_h", "scales_w"}};
  for (int64_t d = 0; d < s.dims; ++d) {
    s.in[d] = in[2 + d];
    s.out[d] = out[d];
    const char* n = names[s.dims - 1][d];
    if (inv.has_arg(n) && !inv.arg(n).isNone()) s.scales[d] = inv.arg(n).toDouble();
  }
  if (s.linear) s.align_corners = inv.arg("align_corners").toBool();
  return s;
}

Programs build(const OpInvocation& inv) {
  const kernels::UpsampleSpec s = spec_of(inv);
  if (is_backward(inv)) {
    return Programs{kernels::build_upsample_backward(
        inv.name, inv.describe(inv.tensor(0)), inv.describe(inv.outputs.at(0)), s, inv.core())};
  }
  return Programs{kernels::build_upsample(inv.name, inv.describe(inv.tensor(0)),
                                          inv.describe(inv.outputs.at(0)), s, inv.core())};
}

bool supports(const OpInvocation& inv) {
  const at::Tensor x = inv.tensor(0);
  // Planes one stride apart, or runs of them per n (channel slices) whose rows are contiguous;
  // channels_last (element-strided rows) takes the fallback.
  auto mergeable = [](const at::Tensor& t) {
    return kernels::upsample_planes_mergeable(t.sizes().vec(), t.strides().vec()) ||
           (t.dim() >= 3 && t.stride(-1) == 1);
  };
  if (!x.defined() || !c10::isFloatingType(x.scalar_type()) || !mergeable(x)) return false;
  for (const char* n : {"out", "grad_input"}) {
    if (inv.has_arg(n) && inv.arg(n).isTensor() && inv.arg(n).toTensor().numel() > 0 &&
        !mergeable(inv.arg(n).toTensor()))
      return false;
  }
  kernels::UpsampleSpec s;
  try {
    s = spec_of(inv);
  } catch (const std::invalid_argument&) {
    return false;  // the CPU kernel reports the bad sizes
  }
  int64_t numel = s.planes;
  for (int64_t d = 0; d < s.dims; ++d) numel *= is_backward(inv) ? s.out[d] : s.in[d];
  if (x.numel() != numel || x.dim() != s.dims + 2) return false;
  return with_runtime(
      [&](runtime::Runtime& r) { return kernels::upsample_fits(s, r.device().params().core); });
}

}  // namespace

NativeOpTable upsample_ops() {
  NativeOpTable ops;
  for (const char* name :
       {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
        "aten::upsample_bilinear2d", "aten::upsample_nearest1d_backward",
        "aten::upsample_nearest2d_backward", "aten::upsample_nearest3d_backward",
        "aten::upsample_bilinear2d_backward"}) {
    ops.push_back({name, build, supports});
  }
  return ops;
}

}  // namespace neuronsim::backend
