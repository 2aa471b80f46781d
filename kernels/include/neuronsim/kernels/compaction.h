#pragma once
// Compaction: outputs whose size depends on the data (nonzero, masked_select) or whose rows come
// from the positions of the nonzero elements (nonzero_static).
// - The count: every tile of the input is compared with 0 on VectorE and summed per partition,
//   the [128, 1] partial counts cross partitions through a TensorE transpose and one more
//   reduction, and the total is written to a 32-bit counter in HBM, which the host reads (a
//   device-to-host sync) before it can size the output.
// - The coordinates of the nonzero elements: the positions are resolved on the host, as the
//   runtime's descriptor generation does for indexed moves (kernels/indexing.h); for each run of
//   consecutive flat positions (up to 128), GpSimdE's iota generates them on partitions and
//   VectorE turns them into one coordinate per dim ((flat / stride) mod size, exact int32 math),
//   and one DMA writes the rows.
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// Counts the nonzero elements of `in` into `count` (one int32).
device_model::Program build_count_nonzero(const std::string& name, const TensorDesc& in,
                                          const TensorDesc& count,
                                          const device_model::CoreParams& core);

/// Writes the coordinates of the elements at the row-major flat positions `positions` of a tensor
/// of shape `sizes` as rows of `out` ([positions.size() or more, sizes.size()]); rows past them
/// are filled with `fill` (nonzero_static's padding).
device_model::Program build_coordinates(const std::string& name, const std::vector<int64_t>& sizes,
                                        const std::vector<int64_t>& positions,
                                        const TensorDesc& out, float fill,
                                        const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
