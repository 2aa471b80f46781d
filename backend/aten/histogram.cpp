// histc and bincount: the kernel library's histogram program (kernels/histogram.h). The CPU
// kernel sizes the output (bincount's length depends on the data); integer histc, which the
// CPU lacks, is computed wider on the host (native_boxed.cpp).
#include <ATen/ATen.h>

#include <cmath>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/histogram.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

bool histogram_dtype(const at::Tensor& t) {
  return t.defined() && !t.is_complex() && t.scalar_type() != at::kBool;
}

// The bins' columns (and histc's extra one) must fit in half an SBUF partition.
bool bins_fit(int64_t bins) {
  return bins >= 0 && bins < (1 << 14);
}

// histc's range as the CPU kernel takes it: [min, max], or the data's when both are 0, widened
// by 1 on each side when empty.
std::pair<float, float> histc_range(const OpInvocation& inv) {
  double lo = inv.scalar("min", 0.0), hi = inv.scalar("max", 0.0);
  const at::Tensor in = inv.tensor(0);
  if (lo == hi && in.numel() > 0) {
    const auto mm = at::aminmax(on_cpu(in).to(at::kDouble));
    lo = std::get<0>(mm).item<double>();
    hi = std::get<1>(mm).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  return {static_cast<float>(lo), static_cast<float>(hi)};
}

}  // namespace

NativeOpTable histogram_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::histc",
                 [](const OpInvocation& inv) -> Programs {
                   const at::Tensor in = inv.tensor(0), out = inv.outputs.at(0);
                   if (in.numel() == 0 || out.numel() == 0) return {};
                   kernels::HistogramSpec s;
                   s.bins = out.numel();
                   s.range = histc_range(inv);
                   return {kernels::build_histogram(
                       inv.name, inv.describe(in), inv.describe(out.reshape({-1})), s, inv.core())};
                 },
                 [](const OpInvocation& inv) {
                   return histogram_dtype(inv.tensor(0)) && bins_fit(inv.arg("bins").toInt());
                 }});
  ops.push_back({"aten::bincount",
                 [](const OpInvocation& inv) -> Programs {
                   const at::Tensor in = inv.tensor(0), out = inv.outputs.at(0);
                   if (in.numel() == 0 || out.numel() == 0) return {};
                   kernels::HistogramSpec s;
                   s.bins = out.numel();
                   const c10::IValue& w = inv.arg("weights");
                   if (w.isTensor() && w.toTensor().defined()) {
                     s.weights = inv.describe(w.toTensor());
                   }
                   return {kernels::build_histogram(inv.name, inv.describe(in), inv.describe(out),
                                                    s, inv.core())};
                 },
                 [](const OpInvocation& inv) {
                   const at::Tensor in = inv.tensor(0);
                   if (!histogram_dtype(in) || in.dim() != 1) return false;
                   const c10::IValue& w = inv.arg("weights");
                   if (w.isTensor() && w.toTensor().defined() && !histogram_dtype(w.toTensor())) {
                     return false;
                   }
                   // The output's length is the data's maximum + 1: read it as the CPU will.
                   const int64_t n = in.numel() == 0 ? 0 : on_cpu(in).max().item<int64_t>() + 1;
                   return bins_fit(std::max<int64_t>(n, inv.arg("minlength").toInt()));
                 }});
  return ops;
}

}  // namespace neuronsim::backend
