#pragma once
// Reductions over any set of dimensions: the kept dimensions map to partitions (the innermost
// kept dimension, 128 rows per tile, outer kept dimensions looped), the reduced dimensions to the
// free axis (chunked; partial results combine on VectorE). Arg-reductions find the first index
// of the extreme value with an iota and a masked min.
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/reduce_spec.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// `out` holds the kept dims in order (reduced dims removed or of size 1).
device_model::Program build_reduce(const std::string& name, const TensorDesc& in,
                                   const TensorDesc& out, const ReduceSpec& spec,
                                   const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
