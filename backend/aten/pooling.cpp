// Max, average and adaptive pooling (2-d and 3-d ops; 1-d ones decompose into 2-d) and their
// backwards: the kernel library's pooling. Adaptive pooling is native when every input extent
// is a multiple of the output's (then it is a regular pooling); other cases take the fallback.
#include <ATen/ATen.h>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/pooling.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

enum class Kind { kMax, kAvg, kAdaptiveAvg, kAdaptiveMax };

struct Family {
  Kind kind;
  int64_t dims;
  bool backward;
};

Family family_of(const std::string& name) {
  Family f{Kind::kMax, name.find("3d") != std::string::npos ? 3 : 2,
           name.find("_backward") != std::string::npos};
  const bool adaptive = name.find("adaptive") != std::string::npos;
  const bool avg = name.find("avg") != std::string::npos;
  f.kind =
      adaptive ? (avg ? Kind::kAdaptiveAvg : Kind::kAdaptiveMax) : (avg ? Kind::kAvg : Kind::kMax);
  return f;
}

// An int[] argument expanded to one value per pooled dim (empty: `fallback`).
std::array<int64_t, 3> per_dim(const OpInvocation& inv, const char* name, int64_t dims,
                               const std::array<int64_t, 3>& fallback) {
  const std::vector<int64_t> v = inv.has_arg(name) ? inv.ints(name) : std::vector<int64_t>{};
  if (v.empty()) return fallback;
  std::array<int64_t, 3> out{1, 1, 1};
  for (int64_t d = 0; d < dims; ++d) out[d] = v.size() == 1 ? v[0] : v.at(d);
  return out;
}

// The pooling a call describes; `in` and `out` are the pooled extents (adaptive pooling needs
// them). Returns false when adaptive windows are not regular.
bool spec_of(const OpInvocation& inv, const Family& f, const std::vector<int64_t>& in,
             const std::vector<int64_t>& out, kernels::PoolSpec& s) {
  s.dims = f.dims;
  s.max = f.kind == Kind::kMax || f.kind == Kind::kAdaptiveMax;
  if (f.kind == Kind::kAdaptiveAvg || f.kind == Kind::kAdaptiveMax) {
    const size_t off = in.size() - f.dims;
    for (int64_t d = 0; d < f.dims; ++d) {
      const int64_t i = in[off + d], o = out[off + d];
      if (o < 1 || i % o != 0) return false;
      s.kernel[d] = s.stride[d] = i / o;
    }
    return true;
  }
  s.kernel = per_dim(inv, "kernel_size", f.dims, {1, 1, 1});
  s.stride = per_dim(inv, "stride", f.dims, s.kernel);
  s.padding = per_dim(inv, "padding", f.dims, {0, 0, 0});
  s.dilation = per_dim(inv, "dilation", f.dims, {1, 1, 1});
  if (f.kind == Kind::kAvg) {
    s.count_include_pad = inv.arg("count_include_pad").toBool();
    const c10::IValue& d = inv.arg("divisor_override");
    if (!d.isNone()) s.divisor_override = d.toInt();
  }
  return true;
}

// PyTorch's output extents of a regular pooling.
std::vector<int64_t> pooled_sizes(const OpInvocation& inv, const Family& f, const at::Tensor& x,
                                  const kernels::PoolSpec& s) {
  std::vector<int64_t> out = x.sizes().vec();
  const bool ceil = inv.has_arg("ceil_mode") && inv.arg("ceil_mode").toBool();
  for (int64_t d = 0; d < f.dims; ++d) {
    const size_t i = out.size() - f.dims + d;
    const int64_t span = x.size(i) + 2 * s.padding[d] - s.dilation[d] * (s.kernel[d] - 1) - 1;
    int64_t o = (ceil ? (span + s.stride[d] - 1) / s.stride[d] : span / s.stride[d]) + 1;
    if (ceil && (o - 1) * s.stride[d] >= x.size(i) + s.padding[d]) --o;
    out[i] = o;
  }
  return out;
}

std::optional<kernels::TensorDesc> indices_of(const OpInvocation& inv, const Family& f) {
  if (f.backward) return inv.describe(inv.arg("indices").toTensor());
  if (inv.outputs.size() > 1 && inv.outputs[1].defined()) return inv.describe(inv.outputs[1]);
  return std::nullopt;
}

Programs build(const OpInvocation& inv) {
  const Family f = family_of(inv.name);
  const at::Tensor x = f.backward ? inv.tensor(1) : inv.tensor(0);
  const at::Tensor y = f.backward ? inv.tensor(0) : inv.outputs.at(0);
  kernels::PoolSpec s;
  if (!spec_of(inv, f, x.sizes().vec(), y.sizes().vec(), s)) {
    throw std::invalid_argument(inv.name + ": adaptive windows are not regular");
  }
  const auto idx = s.max ? indices_of(inv, f) : std::nullopt;
  if (f.backward) {
    return Programs{kernels::build_pooling_backward(
        inv.name, inv.describe(y), idx, inv.describe(inv.outputs.at(0)), s, inv.core())};
  }
  return Programs{
      kernels::build_pooling(inv.name, inv.describe(x), inv.describe(y), idx, s, inv.core())};
}

bool supports(const OpInvocation& inv) {
  const Family f = family_of(inv.name);
  const at::Tensor x = f.backward ? inv.tensor(1) : inv.tensor(0);
  if (!x.defined() || !c10::isFloatingType(x.scalar_type())) return false;
  if (x.dim() != f.dims + 1 && x.dim() != f.dims + 2) return false;
  std::vector<int64_t> out;
  if (f.backward) {
    out = inv.tensor(0).sizes().vec();
  } else if (f.kind == Kind::kAdaptiveAvg || f.kind == Kind::kAdaptiveMax) {
    out = x.sizes().vec();
    const std::vector<int64_t> o = inv.ints("output_size");
    for (int64_t d = 0; d < f.dims; ++d) out[out.size() - f.dims + d] = o.at(o.size() == 1 ? 0 : d);
  }
  kernels::PoolSpec s;
  if (!spec_of(inv, f, x.sizes().vec(), out.empty() ? x.sizes().vec() : out, s)) return false;
  if (out.empty()) out = pooled_sizes(inv, f, x, s);
  if (!spec_of(inv, f, x.sizes().vec(), out, s)) return false;
  return with_runtime([&](runtime::Runtime& r) {
    return kernels::pooling_fits(x.sizes().vec(), out, s, r.device().params().core);
  });
}

}  // namespace

NativeOpTable pooling_ops() {
  NativeOpTable ops;
  for (const char* name :
       {"aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices",
        "aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward",
        "aten::avg_pool2d", "aten::avg_pool3d", "aten::avg_pool2d_backward",
        "aten::avg_pool3d_backward", "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d",
        "aten::_adaptive_avg_pool2d_backward", "aten::_adaptive_avg_pool3d_backward",
        "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d",
        "aten::adaptive_max_pool2d_backward", "aten::adaptive_max_pool3d_backward"}) {
    ops.push_back({name, build, supports});
  }
  return ops;
}

}  // namespace neuronsim::backend
