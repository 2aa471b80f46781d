#pragma once
// Reductions over any set of dimensions: the kept dimensions map to partitions (the innermost
// kept dimension, 128 rows per tile, outer kept dimensions looped), the reduced dimensions to the
// free axis (chunked; partial results combine on VectorE). Arg-reductions find the first index
// of the extreme value with an iota and a masked min.
#include <string>
#include <vector>

#include "neuronsim/device/isa.h"
#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// The VectorE ALU op that folds two partial results of a reduction.
device::AluOp combine_op(device::ReduceOp r);

struct ReduceSpec {
  std::vector<int64_t> dims;  // reduced dims of `in` (empty: all)
  device::ReduceOp op = device::ReduceOp::kAdd;
  float scale = 1.0f;  // applied to the result (mean: 1/N)
  bool arg = false;    // return the index of the first max/min instead of the value
  // var/std: mean first, then sum((x - mean)^2) * scale; `sqrt` for std.
  bool variance = false;
  bool sqrt = false;
  // any/all: reduce (x != 0) instead of x.
  bool nonzero = false;
  // Vector norms: reduce |x| (abs), raised to `power` first; the result raised to `root` after.
  bool abs = false;
  float power = 1.0f;
  float root = 1.0f;
};

/// `out` holds the kept dims in order (reduced dims removed or of size 1).
device::Program build_reduce(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                             const ReduceSpec& spec, const device::CoreParams& core);

}  // namespace neuronsim::kernels
