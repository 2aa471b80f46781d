#pragma once
// Reductions over dims that lie outside the kept innermost dim in memory (x.amax(0), x.var(0)
// of a row-major matrix, a middle dim of a 3-d tensor): the internal kernels build_reduce picks
// for them. See Note [Outer-dim reductions] in column_reduce.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/reduce_spec.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// Calls fn(in_base, out_base) for every index of the kept dims but the innermost: that index's
/// element offsets in the input and the output (ks[0], ks[1] are their strides).
template <typename Fn>
void for_each_outer_kept(const std::vector<int64_t>& sizes,
                         const std::vector<std::vector<int64_t>>& ks, Fn&& fn) {
  const size_t nk = sizes.size();
  std::vector<int64_t> idx(nk - 1, 0);
  while (true) {
    int64_t in_base = 0, out_base = 0;
    for (size_t j = 0; j + 1 < nk; ++j) {
      in_base += idx[j] * ks[0][j];
      out_base += idx[j] * ks[1][j];
    }
    fn(in_base, out_base);
    size_t j = 0;
    for (; j + 1 < nk; ++j) {
      if (++idx[j] < sizes[j]) break;
      idx[j] = 0;
    }
    if (j + 1 >= nk) return;
  }
}

/// A reduction whose kept innermost dim is contiguous in the input and whose reduced dims are
/// not: the coalesced dims as build_reduce sees them.
struct OuterReduce {
  std::vector<int64_t> kept_sizes;                 // innermost last: the contiguous columns
  std::vector<std::vector<int64_t>> kept_strides;  // [0] input, [1] output, per kept dim
  std::vector<int64_t> red_sizes, red_strides;     // one or two reduced dims, innermost last
};

/// Whether the transposed-rows kernel moves the input faster than the columns-per-partition one
/// (max/min/prod only; the latter needs long runs of kept columns per partition, the former
/// enough reduced rows to spread over the DMA engines). Both estimates use the preset's DMA
/// descriptor and engine rates.
bool prefer_transposed_rows(const OuterReduce& r, const device_model::CoreParams& core);

/// max/min/prod over the reduced dims, or var/std (spec.variance, spec.sqrt, spec.scale): rows
/// loaded contiguously and transposed on TensorE, so the kept columns land on partitions.
device_model::Program build_transposed_column_reduce(const std::string& name, const TensorDesc& in,
                                                     const TensorDesc& out, const ReduceSpec& spec,
                                                     const OuterReduce& r,
                                                     const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
