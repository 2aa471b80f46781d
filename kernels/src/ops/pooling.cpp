// Max, average and adaptive pooling (2-d and 3-d ops; 1-d ones decompose into 2-d) and their
// backwards: the kernel library's pooling. Adaptive pooling is native when every input extent
// is a multiple of the output's (then it is a regular pooling); other cases take the fallback.
#include <array>
#include <optional>
#include <stdexcept>

#include "neuronsim/kernels/pooling.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

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
std::array<int64_t, 3> per_dim(const OpCall& call, const char* name, int64_t dims,
                               const std::array<int64_t, 3>& fallback) {
  const std::vector<int64_t> v = call.in_schema(name) ? call.ints(name) : std::vector<int64_t>{};
  if (v.empty()) return fallback;
  std::array<int64_t, 3> out{1, 1, 1};
  for (int64_t d = 0; d < dims; ++d) out[d] = v.size() == 1 ? v[0] : v.at(d);
  return out;
}

// The pooling a call describes; `in` and `out` are the pooled extents (adaptive pooling needs
// them). Returns false when adaptive windows are not regular.
bool spec_of(const OpCall& call, const Family& f, const std::vector<int64_t>& in,
             const std::vector<int64_t>& out, PoolSpec& s) {
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
  s.kernel = per_dim(call, "kernel_size", f.dims, {1, 1, 1});
  s.stride = per_dim(call, "stride", f.dims, s.kernel);
  s.padding = per_dim(call, "padding", f.dims, {0, 0, 0});
  s.dilation = per_dim(call, "dilation", f.dims, {1, 1, 1});
  if (f.kind == Kind::kAvg) {
    s.count_include_pad = call.boolean("count_include_pad", true);
    if (call.has("divisor_override")) s.divisor_override = call.integer("divisor_override", 1);
  }
  return true;
}

// PyTorch's output extents of a regular pooling.
std::vector<int64_t> pooled_sizes(const OpCall& call, const Family& f, const TensorArg& x,
                                  const PoolSpec& s) {
  std::vector<int64_t> out = x.sizes();
  const bool ceil = call.boolean("ceil_mode", false);
  for (int64_t d = 0; d < f.dims; ++d) {
    const size_t i = out.size() - f.dims + d;
    const int64_t span =
        x.size(static_cast<int64_t>(i)) + 2 * s.padding[d] - s.dilation[d] * (s.kernel[d] - 1) - 1;
    int64_t o = (ceil ? (span + s.stride[d] - 1) / s.stride[d] : span / s.stride[d]) + 1;
    if (ceil && (o - 1) * s.stride[d] >= x.size(static_cast<int64_t>(i)) + s.padding[d]) --o;
    out[i] = o;
  }
  return out;
}

std::optional<TensorDesc> indices_of(const OpCall& call, const Family& f) {
  if (f.backward) return call.tensor("indices").desc;
  if (call.num_outputs() > 1 && call.output(1).defined) return call.output(1).desc;
  return std::nullopt;
}

Programs build(const OpCall& call) {
  const Family f = family_of(call.name());
  const TensorArg x = f.backward ? call.tensor(1) : call.tensor(0);
  const TensorArg y = f.backward ? call.tensor(0) : call.output(0);
  PoolSpec s;
  if (!spec_of(call, f, x.sizes(), y.sizes(), s)) {
    throw std::invalid_argument(call.name() + ": adaptive windows are not regular");
  }
  const auto idx = s.max ? indices_of(call, f) : std::nullopt;
  if (f.backward) {
    return Programs{
        build_pooling_backward(call.name(), y.desc, idx, call.output(0).desc, s, call.core())};
  }
  return Programs{build_pooling(call.name(), x.desc, y.desc, idx, s, call.core())};
}

bool supported(const OpCall& call) {
  const Family f = family_of(call.name());
  const TensorArg x = f.backward ? call.tensor(1) : call.tensor(0);
  if (!x.defined || !x.is_floating()) return false;
  if (x.dim() != f.dims + 1 && x.dim() != f.dims + 2) return false;
  std::vector<int64_t> out;
  if (f.backward) {
    out = call.tensor(0).sizes();
  } else if (f.kind == Kind::kAdaptiveAvg || f.kind == Kind::kAdaptiveMax) {
    out = x.sizes();
    const std::vector<int64_t> o = call.ints("output_size");
    for (int64_t d = 0; d < f.dims; ++d) out[out.size() - f.dims + d] = o.at(o.size() == 1 ? 0 : d);
  }
  PoolSpec s;
  if (!spec_of(call, f, x.sizes(), out.empty() ? x.sizes() : out, s)) return false;
  if (out.empty()) out = pooled_sizes(call, f, x, s);
  if (!spec_of(call, f, x.sizes(), out, s)) return false;
  return pooling_fits(x.sizes(), out, s, call.core());
}

}  // namespace

std::vector<OpRule> pooling_rules() {
  std::vector<OpRule> ops;
  for (const char* name :
       {"aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices",
        "aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward",
        "aten::avg_pool2d", "aten::avg_pool3d", "aten::avg_pool2d_backward",
        "aten::avg_pool3d_backward", "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d",
        "aten::_adaptive_avg_pool2d_backward", "aten::_adaptive_avg_pool3d_backward",
        "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d",
        "aten::adaptive_max_pool2d_backward", "aten::adaptive_max_pool3d_backward"}) {
    OpRule r;
    r.name = name;
    r.build = build;
    r.supports = supported;
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
