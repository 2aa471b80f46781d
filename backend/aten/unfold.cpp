// unfold_backward (Tensor.unfold's gradient, e.g. conv-as-unfold and sliding windows): the kernel
// library's window sum. The gradient's dims before and after the unfolded one must each merge
// into one stride (contiguous or expanded gradients do); other layouts take the CPU fallback.
#include <ATen/ATen.h>
#include <c10/core/WrapDimMinimal.h>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/unfold.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// Dims [from, to) of t as one (size, stride), when they are one stride apart.
std::optional<std::pair<int64_t, int64_t>> merged(const at::Tensor& t, int64_t from, int64_t to) {
  int64_t size = 1, stride = 0;
  bool any = false;
  for (int64_t d = to - 1; d >= from; --d) {
    if (t.size(d) == 1) continue;
    if (!any) {
      stride = t.stride(d);
      any = true;
    } else if (t.stride(d) != stride * size) {
      return std::nullopt;
    }
    size *= t.size(d);
  }
  return std::make_pair(size, stride);
}

struct Geometry {
  kernels::UnfoldShape shape;
  std::array<int64_t, 4> strides{};
};

std::optional<Geometry> geometry(const OpInvocation& inv) {
  const at::Tensor g = inv.tensor(0);
  const std::vector<int64_t> sizes = inv.ints("input_sizes");
  if (!g.defined() || g.dim() != static_cast<int64_t>(sizes.size()) + 1) return std::nullopt;
  if (sizes.empty()) {  // a 0-dim input: one window over its one element
    Geometry geo;
    geo.shape = {1, 1, 1, 1, g.size(0), inv.arg("step").toInt()};
    geo.strides = {0, 0, 0, g.stride(0)};
    return geo;
  }
  const int64_t nd = static_cast<int64_t>(sizes.size());
  const int64_t dim = c10::maybe_wrap_dim(inv.arg("dim").toInt(), nd);
  Geometry geo;
  kernels::UnfoldShape& s = geo.shape;
  s.size = inv.arg("size").toInt();
  s.step = inv.arg("step").toInt();
  s.length = sizes[dim];
  s.windows = g.size(dim);
  const auto outer = merged(g, 0, dim), inner = merged(g, dim + 1, nd);
  if (!outer || !inner || g.size(nd) != s.size) return std::nullopt;
  s.outer = outer->first;
  s.inner = inner->first;
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim && g.size(d) != sizes[d]) return std::nullopt;
  }
  geo.strides = {outer->second, g.stride(dim), inner->second, g.stride(nd)};
  return geo;
}

Programs build(const OpInvocation& inv) {
  const auto geo = geometry(inv);
  if (!geo) throw std::invalid_argument(inv.name + ": unsupported gradient layout");
  return Programs{kernels::build_unfold_backward(inv.name, inv.describe(inv.tensor(0)),
                                                 geo->strides, inv.describe(inv.outputs.at(0)),
                                                 geo->shape, inv.core())};
}

bool supports(const OpInvocation& inv) {
  const at::Tensor g = inv.tensor(0);
  if (!g.defined() || !c10::isFloatingType(g.scalar_type())) return false;
  if (inv.has_arg("out") && inv.arg("out").isTensor() && !inv.arg("out").toTensor().is_contiguous())
    return false;
  const auto geo = geometry(inv);
  if (!geo) return false;
  return with_runtime([&](runtime::Runtime& r) {
    return kernels::unfold_backward_fits(geo->shape, r.device().params().core);
  });
}

}  // namespace

NativeOpTable unfold_ops() {
  return {{"aten::unfold_backward", build, supports}};
}

}  // namespace neuronsim::backend
