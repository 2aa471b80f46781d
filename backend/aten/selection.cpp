// Selection and scans along one dimension: topk and sort (argsort decomposes into sort), cumsum
// and cumprod (kernels/selection.h). Values come from ATen's CPU kernels on the CPU views; the
// programs give the time (and, in ISA mode, the values of ops without 64-bit outputs: the scans
// of 32-bit data; topk and sort return int64 indices, which keep host values).
#include <ATen/ATen.h>

#include <optional>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/selection.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// Sorting a row is k = n selection rounds over n elements: beyond this the quadratic cost is not
// what the device's sort would pay, so longer rows take the CPU fallback.
constexpr int64_t kMaxSortLength = 1024;

int64_t dim_of(const OpInvocation& inv, const at::Tensor& t, int64_t fallback) {
  int64_t d = inv.has_arg("dim") ? inv.arg("dim").toInt() : fallback;
  return t.dim() == 0 ? 0 : at::maybe_wrap_dim(d, t.dim());
}

// The layout alone (support checks run before device addresses are known).
std::optional<kernels::RowView> rows_of(const at::Tensor& t, int64_t dim) {
  kernels::TensorDesc d;
  d.sizes = t.sizes().vec();
  d.strides = t.strides().vec();
  return kernels::row_view(d, dim);
}

const device::CoreParams& core_params() {
  return with_runtime(
      [](runtime::Runtime& r) -> const device::CoreParams& { return r.device().params().core; });
}

// The input's rows along `dim` fit the kernel (at most max_n long); the outputs, when already
// allocated (out=), fold into rows too.
bool fits(const OpInvocation& inv, int64_t dim, int64_t max_n) {
  const at::Tensor in = inv.tensor(0);
  if (!in.defined() || in.is_complex() || in.scalar_type() == at::kBool) return false;
  const auto v = rows_of(in, dim);
  if (!v || v->n > max_n) return false;
  for (const at::Tensor& o : inv.outputs) {
    if (o.defined() && !rows_of(o, dim)) return false;
  }
  return true;
}

Programs select(const OpInvocation& inv, int64_t k, bool largest) {
  const at::Tensor in = inv.tensor(0);
  return {kernels::build_topk(inv.name, inv.describe(in), inv.describe(inv.outputs.at(0)),
                              inv.describe(inv.outputs.at(1)), dim_of(inv, in, -1), k, largest,
                              inv.core())};
}

}  // namespace

NativeOpTable selection_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::topk",
                 [](const OpInvocation& inv) {
                   const bool largest = !inv.has_arg("largest") || inv.arg("largest").toBool();
                   return select(inv, inv.arg("k").toInt(), largest);
                 },
                 [](const OpInvocation& inv) {
                   const at::Tensor in = inv.tensor(0);
                   return in.defined() && fits(inv, dim_of(inv, in, -1),
                                               kernels::max_selection_length(core_params()));
                 }});
  ops.push_back(
      {"aten::sort",
       [](const OpInvocation& inv) {
         const at::Tensor in = inv.tensor(0);
         const int64_t dim = dim_of(inv, in, -1);
         const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
         const bool descending = inv.has_arg("descending") && inv.arg("descending").toBool();
         return select(inv, n, descending);
       },
       [](const OpInvocation& inv) {
         const at::Tensor in = inv.tensor(0);
         return in.defined() &&
                fits(inv, dim_of(inv, in, -1),
                     std::min(kMaxSortLength, kernels::max_selection_length(core_params())));
       }});
  for (const char* n : {"aten::cumsum", "aten::cumprod"}) {
    const bool product = std::string(n) == "aten::cumprod";
    ops.push_back({n,
                   [product](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     return Programs{kernels::build_scan(inv.name, inv.describe(in),
                                                         inv.describe(inv.outputs.at(0)),
                                                         dim_of(inv, in, 0), product, inv.core())};
                   },
                   [](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     return in.defined() &&
                            fits(inv, dim_of(inv, in, 0), kernels::max_scan_length(core_params()));
                   }});
  }
  return ops;
}

}  // namespace neuronsim::backend
