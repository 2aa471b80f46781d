// Selection and scans along one dimension: topk and sort (argsort decomposes into sort), cumsum
// and cumprod (kernels/selection.h). Long rows (and few rows of moderate length) take the
// kernels that spread a row over all partitions (Note [Long-row selection]). topk and sort return
// int64 indices, which keep host values in ISA mode.
#include <algorithm>
#include <limits>
#include <optional>

#include "neuronsim/kernels/selection.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

// Sorting a row by selection is k = n rounds over n elements: beyond this length the bitonic
// network over the row spread across partitions (build_sort_long) sorts it.
constexpr int64_t kMaxSortLength = 1024;

int64_t dim_of(const OpCall& call, const TensorArg& t, int64_t fallback) {
  const int64_t d = call.in_schema("dim") ? call.integer("dim", fallback) : fallback;
  if (t.dim() == 0) return 0;
  return d < 0 ? d + t.dim() : d;
}

// The layout alone (support checks run before device addresses are known).
std::optional<RowView> rows_of(const TensorArg& t, int64_t dim) {
  TensorDesc d;
  d.sizes = t.sizes();
  for (int64_t i = 0; i < t.dim(); ++i) d.strides.push_back(t.stride(i));
  return row_view(d, dim);
}

// The input's rows along `dim` fit the kernel (at most max_n long); the outputs, when already
// allocated (out=), fold into rows too.
bool fits(const OpCall& call, int64_t dim, int64_t max_n) {
  const TensorArg in = call.tensor(0);
  if (!in.defined || is_complex(in.type) || in.type == ScalarType::kBool) return false;
  const auto v = rows_of(in, dim);
  if (!v || v->n > max_n) return false;
  for (size_t i = 0; i < call.num_outputs(); ++i) {
    const TensorArg o = call.output(i);
    if (o.defined && !rows_of(o, dim)) return false;
  }
  return true;
}

// Whether topk of `rows` rows of n takes the long-row kernel: always when the row does not fit
// one partition; otherwise when it is cheaper by a rough VectorE cycle count (few rows).
bool use_long_topk(int64_t rows, int64_t n, int64_t k, const device_model::CoreParams& core) {
  if (!long_topk_fits(n, k, core)) return false;
  if (n > max_selection_length(core)) return true;
  return long_topk_cycles(rows, n, k, core) < short_topk_cycles(rows, n, k, core);
}

Programs select(const OpCall& call, int64_t k, bool largest, bool allow_long = true) {
  const TensorArg in = call.tensor(0);
  const int64_t dim = dim_of(call, in, -1);
  const TensorDesc x = in.desc, values = call.output(0).desc, indices = call.output(1).desc;
  const auto v = row_view(x, dim);
  if (allow_long && v && use_long_topk(v->rows, v->n, k, call.core()))
    return {build_topk_long(call.name(), x, values, indices, dim, k, largest, call.core())};
  return {build_topk(call.name(), x, values, indices, dim, k, largest, call.core())};
}

// Whether sort takes the bitonic network: rows too long for selection rounds, or few rows for
// which it is cheaper (the rounds are quadratic in the row length).
bool use_long_sort(const OpCall& call, int64_t dim, int64_t n) {
  const device_model::CoreParams& core = call.core();
  if (n > std::min(kMaxSortLength, max_selection_length(core))) return true;
  const auto v = rows_of(call.tensor(0), dim);
  return v && n <= max_long_sort_length(core) &&
         long_sort_cycles(v->rows, n, core) < short_topk_cycles(v->rows, n, n, core);
}

bool small_float(ScalarType t) {
  return t == ScalarType::kFloat32 || t == ScalarType::kBFloat16 || t == ScalarType::kFloat16;
}

}  // namespace

std::vector<OpRule> selection_rules() {
  std::vector<OpRule> ops;
  ops.push_back(make_rule(
      "aten::topk",
      [](const OpCall& call) {
        return select(call, call.integer("k", 1), call.boolean("largest", true));
      },
      [](const OpCall& call) {
        const TensorArg in = call.tensor(0);
        if (!in.defined) return false;
        const int64_t dim = dim_of(call, in, -1);
        const device_model::CoreParams& core = call.core();
        if (fits(call, dim, max_selection_length(core))) return true;
        const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
        return fits(call, dim, std::numeric_limits<int64_t>::max()) &&
               long_topk_fits(n, call.integer("k", 1), core);
      }));
  ops.push_back(make_rule(
      "aten::sort",
      [](const OpCall& call) {
        const TensorArg in = call.tensor(0);
        const int64_t dim = dim_of(call, in, -1);
        const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
        const bool descending = call.boolean("descending", false);
        if (use_long_sort(call, dim, n))
          return Programs{build_sort_long(call.name(), in.desc, call.output(0).desc,
                                          call.output(1).desc, dim, descending, call.core())};
        return select(call, n, descending, /*allow_long=*/false);
      },
      [](const OpCall& call) {
        const TensorArg in = call.tensor(0);
        if (!in.defined) return false;
        const int64_t dim = dim_of(call, in, -1);
        const device_model::CoreParams& core = call.core();
        return fits(call, dim, std::min(kMaxSortLength, max_selection_length(core))) ||
               fits(call, dim, max_long_sort_length(core));
      }));
  for (const char* n : {"aten::cumsum", "aten::cumprod"}) {
    const bool product = std::string(n) == "aten::cumprod";
    ops.push_back(make_rule(
        n,
        [product](const OpCall& call) {
          const TensorArg in = call.tensor(0);
          const int64_t dim = dim_of(call, in, 0);
          const int64_t len = in.dim() == 0 ? 1 : in.size(dim);
          if (len > max_scan_length(call.core()))
            return Programs{build_scan_long(call.name(), in.desc, call.output(0).desc, dim, product,
                                            call.core())};
          return Programs{
              build_scan(call.name(), in.desc, call.output(0).desc, dim, product, call.core())};
        },
        [](const OpCall& call) {
          const TensorArg in = call.tensor(0);
          if (!in.defined) return false;
          const int64_t dim = dim_of(call, in, 0);
          const device_model::CoreParams& core = call.core();
          if (fits(call, dim, max_scan_length(core))) return true;
          // Long rows: 32- and 16-bit float data only (the carry moves through TensorE).
          bool floats = small_float(in.type);
          if (const auto t = call.scalar_type("dtype")) floats = floats && small_float(*t);
          for (size_t i = 0; i < call.num_outputs(); ++i) {
            const TensorArg o = call.output(i);
            floats = floats && (!o.defined || small_float(o.type));
          }
          return floats && fits(call, dim, max_long_scan_length(core));
        }));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
