#pragma once
// What a reduction computes (reduction.h runs it; column_reduce.h is its outer-dims form).
#include <cstdint>
#include <vector>

#include "neuronsim/device_model/isa.h"

namespace neuronsim::kernels {

/// The VectorE ALU op that folds two partial results of a reduction.
device_model::AluOp combine_op(device_model::ReduceOp r);

struct ReduceSpec {
  std::vector<int64_t> dims;  // reduced dims of `in` (empty: all)
  device_model::ReduceOp op = device_model::ReduceOp::kAdd;
  float scale = 1.0f;  // applied to the result (mean: 1/N)
  bool arg = false;    // return the index of the first max/min instead of the value
  // var/std: mean first, then sum((x - mean)^2) * scale; `sqrt` for std.
  bool variance = false;
  bool sqrt = false;
  // any/all: reduce (x != 0) instead of x.
  bool nonzero = false;
  // nansum: NaN elements count as zero.
  bool ignore_nan = false;
  // Vector norms: reduce |x| (abs), raised to `power` first; the result raised to `root` after.
  bool abs = false;
  float power = 1.0f;
  float root = 1.0f;
};

}  // namespace neuronsim::kernels
