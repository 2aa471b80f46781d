// histc and bincount: the kernel library's histogram program (kernels/histogram.h). The CPU
// kernel sizes the output (bincount's length depends on the data); integer histc, which the
// CPU lacks, is computed wider on the host by the backend.
#include <algorithm>
#include <cmath>

#include "neuronsim/kernels/histogram.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

bool histogram_dtype(const TensorArg& t) {
  return t.defined && !is_complex(t.type) && t.type != ScalarType::kBool;
}

// The bins' columns (and histc's extra one) must fit in half an SBUF partition.
bool bins_fit(int64_t bins) {
  return bins >= 0 && bins < (1 << 14);
}

// histc's range as the CPU kernel takes it: [min, max], or the data's when both are 0, widened
// by 1 on each side when empty.
std::pair<float, float> histc_range(const OpCall& call) {
  double lo = call.number("min", 0.0), hi = call.number("max", 0.0);
  const TensorArg in = call.tensor(0);
  if (lo == hi && in.numel() > 0) {
    const std::vector<double> v = read_doubles(in);
    const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
    lo = *mn;
    hi = *mx;
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  return {static_cast<float>(lo), static_cast<float>(hi)};
}

}  // namespace

std::vector<OpRule> histogram_rules() {
  OpRule histc;
  histc.name = "aten::histc";
  histc.build = [](const OpCall& call) -> Programs {
    const TensorArg in = call.tensor(0), out = call.output(0);
    if (in.numel() == 0 || out.numel() == 0) return {};
    HistogramSpec s;
    s.bins = static_cast<int64_t>(out.numel());
    s.range = histc_range(call);
    TensorDesc flat = out.desc;
    flat.sizes = {s.bins};
    flat.strides = {1};
    return {build_histogram(call.name(), in.desc, flat, s, call.core())};
  };
  histc.supports = [](const OpCall& call) {
    return histogram_dtype(call.tensor(0)) && bins_fit(call.integer("bins", 100));
  };
  OpRule bincount;
  bincount.name = "aten::bincount";
  bincount.build = [](const OpCall& call) -> Programs {
    const TensorArg in = call.tensor(0), out = call.output(0);
    if (in.numel() == 0 || out.numel() == 0) return {};
    HistogramSpec s;
    s.bins = static_cast<int64_t>(out.numel());
    if (call.has("weights")) s.weights = call.tensor("weights").desc;
    return {build_histogram(call.name(), in.desc, out.desc, s, call.core())};
  };
  bincount.supports = [](const OpCall& call) {
    const TensorArg in = call.tensor(0);
    if (!histogram_dtype(in) || in.dim() != 1) return false;
    if (call.has("weights") && !histogram_dtype(call.tensor("weights"))) return false;
    // The output's length is the data's maximum + 1: read it as the CPU will.
    int64_t n = 0;
    if (in.numel() > 0) {
      const std::vector<int64_t> v = read_integers(in);
      n = *std::max_element(v.begin(), v.end()) + 1;
    }
    return bins_fit(std::max<int64_t>(n, call.integer("minlength", 0)));
  };
  return {histc, bincount};
}

}  // namespace neuronsim::kernels::ops
