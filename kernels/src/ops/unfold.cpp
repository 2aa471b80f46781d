// unfold_backward (Tensor.unfold's gradient, e.g. conv-as-unfold and sliding windows): the kernel
// library's window sum. The gradient's dims before and after the unfolded one must each merge
// into one stride (contiguous or expanded gradients do); other layouts take the CPU fallback.
#include <array>
#include <optional>
#include <stdexcept>

#include "neuronsim/kernels/unfold.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

// Dims [from, to) of t as one (size, stride), when they are one stride apart.
std::optional<std::pair<int64_t, int64_t>> merged(const TensorArg& t, int64_t from, int64_t to) {
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
  UnfoldShape shape;
  std::array<int64_t, 4> strides{};
};

std::optional<Geometry> geometry(const OpCall& call) {
  const TensorArg g = call.tensor(0);
  const std::vector<int64_t> sizes = call.ints("input_sizes");
  if (!g.defined || g.dim() != static_cast<int64_t>(sizes.size()) + 1) return std::nullopt;
  if (sizes.empty()) {  // a 0-dim input: one window over its one element
    Geometry geo;
    geo.shape = {1, 1, 1, 1, g.size(0), call.integer("step", 1)};
    geo.strides = {0, 0, 0, g.stride(0)};
    return geo;
  }
  const int64_t nd = static_cast<int64_t>(sizes.size());
  const int64_t dim = call.dim("dim", nd);
  Geometry geo;
  UnfoldShape& s = geo.shape;
  s.size = call.integer("size", 1);
  s.step = call.integer("step", 1);
  s.length = sizes[static_cast<size_t>(dim)];
  s.windows = g.size(dim);
  const auto outer = merged(g, 0, dim), inner = merged(g, dim + 1, nd);
  if (!outer || !inner || g.size(nd) != s.size) return std::nullopt;
  s.outer = outer->first;
  s.inner = inner->first;
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim && g.size(d) != sizes[static_cast<size_t>(d)]) return std::nullopt;
  }
  geo.strides = {outer->second, g.stride(dim), inner->second, g.stride(nd)};
  return geo;
}

}  // namespace

std::vector<OpRule> unfold_rules() {
  OpRule r;
  r.name = "aten::unfold_backward";
  r.build = [](const OpCall& call) {
    const auto geo = geometry(call);
    if (!geo) throw std::invalid_argument(call.name() + ": unsupported gradient layout");
    return Programs{build_unfold_backward(call.name(), call.tensor(0).desc, geo->strides,
                                          call.output(0).desc, geo->shape, call.core())};
  };
  r.supports = [](const OpCall& call) {
    const TensorArg g = call.tensor(0);
    if (!g.defined || !g.is_floating()) return false;
    if (call.kind("out") == ArgKind::kTensor && !call.tensor("out").is_contiguous()) return false;
    const auto geo = geometry(call);
    return geo && unfold_backward_fits(geo->shape, call.core());
  };
  return {r};
}

}  // namespace neuronsim::kernels::ops
