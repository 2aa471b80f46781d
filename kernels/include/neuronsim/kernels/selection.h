#pragma once
// Selection along one dimension (topk, sort, argsort) and scans along one dimension (cumsum,
// cumprod). Both put the rows (every other element position) on partitions, 128 per tile, and the
// selected or scanned dimension on the free axis.
// - Selection picks the k extreme values one at a time on VectorE: the extreme of the still
//   available elements (tensor_reduce), its first index (an iota selected where the value
//   matches, min-reduced), then that index is marked taken. Ties go to the lower index, so a full
//   sort is stable. The real VectorE finds eight at a time (max8 / match_replace8); this ISA has
//   no such instruction, so the cost is one round of ~7 instructions per selected element.
// - Long rows (selection_long.cpp, Note [Long-row selection]) spread one row over all 128
//   partitions instead: topk selects per-partition candidates and merges the 128 sorted lists
//   pairwise (bitonic merges, DMA between partitions); sort is a bitonic network of VectorE
//   compare-exchange stages, TensorE transposes bringing cross-partition partners together.
//   Both compare (value, index) pairs, so ties keep the lower index first and NaN sorts as
//   PyTorch's largest value.
// - A scan is one tensor_tensor per column (out[:, j] = out[:, j - 1] op x[:, j]); the real
//   VectorE's tensor_tensor_scan does it in one instruction, which this ISA does not have.
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// `t` as rows x n along `dim`: row r, element j at offset r * row_stride + j * stride. Null when
/// the other dims do not fold into one uniformly strided row index.
struct RowView {
  int64_t rows = 0, n = 0, row_stride = 0, stride = 0;
};
std::optional<RowView> row_view(const TensorDesc& t, int64_t dim);

/// The k largest (or smallest) elements of each row of `in` along `dim`, sorted, into `values`
/// and `indices` (the same dim, of size k). Throws std::invalid_argument for layouts row_view
/// rejects or k > n.
device_model::Program build_topk(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& values, const TensorDesc& indices, int64_t dim,
                                 int64_t k, bool largest, const device_model::CoreParams& core);

/// topk over rows spread across partitions (few long rows, e.g. sampling over a vocab row): the
/// k extreme elements in order, equal values lower index first, NaN largest (as PyTorch).
/// Throws std::invalid_argument when long_topk_fits is false.
device_model::Program build_topk_long(const std::string& name, const TensorDesc& in,
                                      const TensorDesc& values, const TensorDesc& indices,
                                      int64_t dim, int64_t k, bool largest,
                                      const device_model::CoreParams& core);
/// The largest k build_topk_long takes.
inline constexpr int64_t kMaxLongTopk = 1024;
/// build_topk_long takes rows of n with this k (SBUF holds a row's chunk and candidates).
bool long_topk_fits(int64_t n, int64_t k, const device_model::CoreParams& core);

/// Rough VectorE cycles of topk over `rows` rows of n by build_topk (one row per lane, k
/// rounds of 8 instructions over the row) and by build_topk_long (a bitonic network over each
/// row's 128th, then 7 merge levels): which kernel a caller should pick.
double short_topk_cycles(int64_t rows, int64_t n, int64_t k, const device_model::CoreParams& core);
double long_topk_cycles(int64_t rows, int64_t n, int64_t k, const device_model::CoreParams& core);
/// The same for build_sort_long (compare with short_topk_cycles at k = n).
double long_sort_cycles(int64_t rows, int64_t n, const device_model::CoreParams& core);

/// Stable sort of each row (ascending, or descending with `descending`; NaN largest) into
/// `values` and `indices` (same shape as `in`) by a bitonic network over the row spread across
/// partitions. Throws std::invalid_argument for rows longer than max_long_sort_length.
device_model::Program build_sort_long(const std::string& name, const TensorDesc& in,
                                      const TensorDesc& values, const TensorDesc& indices,
                                      int64_t dim, bool descending,
                                      const device_model::CoreParams& core);
int64_t max_long_sort_length(const device_model::CoreParams& core);

/// Inclusive scan of `in` along `dim` into `out` (same shape): sum (cumsum) or product (cumprod).
device_model::Program build_scan(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, int64_t dim, bool product,
                                 const device_model::CoreParams& core);

/// Inclusive scan of long float rows (build_scan's result) with the row spread over all
/// partitions: each partition scans its chunk (Hillis-Steele, log2 of the chunk steps), the
/// chunk totals are scanned across partitions after a TensorE transpose and added back. The
/// summation order differs from a sequential scan (fp32 rounding). Throws
/// std::invalid_argument for integer data or rows over max_long_scan_length.
device_model::Program build_scan_long(const std::string& name, const TensorDesc& in,
                                      const TensorDesc& out, int64_t dim, bool product,
                                      const device_model::CoreParams& core);
int64_t max_long_scan_length(const device_model::CoreParams& core);

/// The largest n each kernel takes: the row and its work buffers stay in SBUF.
int64_t max_selection_length(const device_model::CoreParams& core);
int64_t max_scan_length(const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
