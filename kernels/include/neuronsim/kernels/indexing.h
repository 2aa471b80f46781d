#pragma once
// Data-dependent movement (gather, scatter, index_select, index_put, embedding): the caller
// resolves the indices into element positions, as the runtime's descriptor generation would, and
// the kernel moves each contiguous run with one DMA (HBM to HBM), or for accumulation loads
// destination and source runs into SBUF, adds them on VectorE and stores the sum. Runs are
// processed in order, so repeated destinations accumulate deterministically.
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// dst[dst_pos[i]] = src[src_pos[i]], or with `accumulate` dst[dst_pos[i]] = dst[dst_pos[i]]
/// `combine` (src[src_pos[i]] * scale) (index_add's alpha, scatter's reduce="multiply"):
/// positions are logical row-major element indices into each tensor's shape.
device_model::Program build_indexed_copy(const std::string& name, const TensorDesc& src,
                                         const std::vector<int64_t>& src_pos, const TensorDesc& dst,
                                         const std::vector<int64_t>& dst_pos, bool accumulate,
                                         const device_model::CoreParams& core, float scale = 1.0f,
                                         device_model::AluOp combine = device_model::AluOp::kAdd);

/// dst[dst_pos[i]] = value: a memset in SBUF, then one DMA per contiguous run.
device_model::Program build_indexed_fill(const std::string& name, const TensorDesc& dst,
                                         const std::vector<int64_t>& dst_pos, float value,
                                         const device_model::CoreParams& core);

/// Memory offset (elements) of a logical row-major position.
int64_t element_offset(const TensorDesc& t, int64_t position);

}  // namespace neuronsim::kernels
