// Selection and scans along one dimension: topk and sort (argsort decomposes into sort), cumsum
// and cumprod (kernels/selection.h). Long rows (and few rows of moderate length) take the
// kernels that spread a row over all partitions (Note [Long-row selection]). Values come from
// ATen's CPU kernels on the CPU views; the programs give the time (and, in ISA mode, the values of
// ops without 64-bit outputs: the scans of 32-bit data; topk and sort return int64 indices, which
// keep host values).
#include <ATen/ATen.h>

#include <limits>
#include <optional>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/selection.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// Sorting a row by selection is k = n rounds over n elements: beyond this length the bitonic
// network over the row spread across partitions (build_sort_long) sorts it.
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

// Whether topk of `rows` rows of n takes the long-row kernel: always when the row does not fit
// one partition; otherwise when it is cheaper by a rough VectorE cycle count (few rows).
bool use_long_topk(int64_t rows, int64_t n, int64_t k, const device::CoreParams& core) {
  if (!kernels::long_topk_fits(n, k, core)) return false;
  if (n > kernels::max_selection_length(core)) return true;
  return kernels::long_topk_cycles(rows, n, k, core) < kernels::short_topk_cycles(rows, n, k, core);
}

Programs select(const OpInvocation& inv, int64_t k, bool largest, bool allow_long = true) {
  const at::Tensor in = inv.tensor(0);
  const int64_t dim = dim_of(inv, in, -1);
  const kernels::TensorDesc x = inv.describe(in), values = inv.describe(inv.outputs.at(0)),
                            indices = inv.describe(inv.outputs.at(1));
  const auto v = kernels::row_view(x, dim);
  if (allow_long && v && use_long_topk(v->rows, v->n, k, inv.core()))
    return {kernels::build_topk_long(inv.name, x, values, indices, dim, k, largest, inv.core())};
  return {kernels::build_topk(inv.name, x, values, indices, dim, k, largest, inv.core())};
}

// Whether sort takes the bitonic network: rows too long for selection rounds, or few rows for
// which it is cheaper (the rounds are quadratic in the row length).
bool use_long_sort(const OpInvocation& inv, int64_t dim, int64_t n) {
  const device::CoreParams& core = inv.core();
  if (n > std::min(kMaxSortLength, kernels::max_selection_length(core))) return true;
  const auto v = rows_of(inv.tensor(0), dim);
  return v && n <= kernels::max_long_sort_length(core) &&
         kernels::long_sort_cycles(v->rows, n, core) <
             kernels::short_topk_cycles(v->rows, n, n, core);
}

bool topk_supported(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0);
  if (!in.defined()) return false;
  const int64_t dim = dim_of(inv, in, -1);
  const device::CoreParams& core = core_params();
  if (fits(inv, dim, kernels::max_selection_length(core))) return true;
  const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
  return fits(inv, dim, std::numeric_limits<int64_t>::max()) &&
         kernels::long_topk_fits(n, inv.arg("k").toInt(), core);
}

}  // namespace

NativeOpTable selection_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::topk",
                 [](const OpInvocation& inv) {
                   const bool largest = !inv.has_arg("largest") || inv.arg("largest").toBool();
                   return select(inv, inv.arg("k").toInt(), largest);
                 },
                 topk_supported});
  ops.push_back(
      {"aten::sort",
       [](const OpInvocation& inv) {
         const at::Tensor in = inv.tensor(0);
         const int64_t dim = dim_of(inv, in, -1);
         const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
         const bool descending = inv.has_arg("descending") && inv.arg("descending").toBool();
         if (use_long_sort(inv, dim, n))
           return Programs{kernels::build_sort_long(
               inv.name, inv.describe(in), inv.describe(inv.outputs.at(0)),
               inv.describe(inv.outputs.at(1)), dim, descending, inv.core())};
         return select(inv, n, descending, /*allow_long=*/false);
       },
       [](const OpInvocation& inv) {
         const at::Tensor in = inv.tensor(0);
         if (!in.defined()) return false;
         const int64_t dim = dim_of(inv, in, -1);
         const device::CoreParams& core = core_params();
         return fits(inv, dim, std::min(kMaxSortLength, kernels::max_selection_length(core))) ||
                fits(inv, dim, kernels::max_long_sort_length(core));
       }});
  for (const char* n : {"aten::cumsum", "aten::cumprod"}) {
    const bool product = std::string(n) == "aten::cumprod";
    ops.push_back({n,
                   [product](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     const int64_t dim = dim_of(inv, in, 0);
                     const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
                     if (n > kernels::max_scan_length(inv.core()))
                       return Programs{kernels::build_scan_long(inv.name, inv.describe(in),
                                                                inv.describe(inv.outputs.at(0)),
                                                                dim, product, inv.core())};
                     return Programs{kernels::build_scan(inv.name, inv.describe(in),
                                                         inv.describe(inv.outputs.at(0)), dim,
                                                         product, inv.core())};
                   },
                   [](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     if (!in.defined()) return false;
                     const int64_t dim = dim_of(inv, in, 0);
                     const device::CoreParams& core = core_params();
                     if (fits(inv, dim, kernels::max_scan_length(core))) return true;
                     // Long rows: 32- and 16-bit float data only (the carry moves through
                     // TensorE).
                     auto small_float = [](at::ScalarType t) {
                       return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
                     };
                     bool floats = small_float(in.scalar_type());
                     if (inv.has_arg("dtype") && !inv.arg("dtype").isNone())
                       floats = floats && small_float(inv.arg("dtype").toScalarType());
                     for (const at::Tensor& o : inv.outputs)
                       floats = floats && (!o.defined() || small_float(o.scalar_type()));
                     return floats && fits(inv, dim, kernels::max_long_scan_length(core));
                   }});
  }
  return ops;
}

}  // namespace neuronsim::backend
