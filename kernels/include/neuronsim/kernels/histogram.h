#pragma once
// Histograms (histc, bincount) on VectorE and TensorE: each input tile's elements are compared
// with every bin (one compare and one free-axis sum per bin into a [partitions x bins] count
// tile), the per-tile counts accumulate on VectorE, and TensorE sums the partitions (ones^T @
// counts) at the end.
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct HistogramSpec {
  int64_t bins = 1;
  /// histc: `bins` equal bins over [lo, hi] (hi inclusive), elements outside ignored. Without
  /// a range (bincount) bin k counts the elements equal to k.
  std::optional<std::pair<float, float>> range;
  /// bincount: each element adds its weight instead of 1 (same shape as the input).
  std::optional<TensorDesc> weights;
};

/// `out` holds `bins` elements (contiguous).
device_model::Program build_histogram(const std::string& name, const TensorDesc& in,
                                      const TensorDesc& out, const HistogramSpec& spec,
                                      const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
