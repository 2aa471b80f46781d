#pragma once
// Reading a tensor argument's values on the host, for rules whose programs depend on the data
// (indices, targets, a histogram's range): the runtime's descriptor generation reads them so.
// Element order is logical row-major; positions are logical row-major element indices.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::kernels::ops {

/// Thrown when a rule needs tensor values that do not exist (a compiled graph's build, timing-only
/// runs): its programs are built when the values are known.
struct ValuesRequired : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Every element as an integer (floats truncate). Throws ValuesRequired when the tensor has no
/// host-readable values.
std::vector<int64_t> read_integers(const TensorArg& t);
/// Every element as a double.
std::vector<double> read_doubles(const TensorArg& t);

/// The row-major position of every element of a tensor of these sizes, as a tensor of them:
/// 0, 1, ..., numel - 1.
struct Positions {
  std::vector<int64_t> sizes;
  std::vector<int64_t> values;  // row-major

  static Positions of(const std::vector<int64_t>& sizes);
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  /// PyTorch's index_select along `dim` by `index` (1-d).
  Positions index_select(int64_t dim, const std::vector<int64_t>& index) const;
  /// PyTorch's gather along `dim` by an index tensor of `index_sizes` (row-major values).
  Positions gather(int64_t dim, const std::vector<int64_t>& index_sizes,
                   const std::vector<int64_t>& index) const;
  /// The leading block [0, s) of every dim (scatter's source window of an index's shape).
  Positions leading(const std::vector<int64_t>& window) const;
  /// PyTorch's advanced indexing: indices[i] (empty sizes: None) indexes dim i; index tensors
  /// broadcast together; their result dims replace the indexed dims where those are adjacent,
  /// else lead.
  struct Index {
    bool defined = false;
    std::vector<int64_t> sizes;
    std::vector<int64_t> values;
  };
  Positions index(const std::vector<Index>& indices) const;
  /// Broadcast to `sizes` (right-aligned, as expand).
  Positions expand(const std::vector<int64_t>& sizes) const;
};

}  // namespace neuronsim::kernels::ops
