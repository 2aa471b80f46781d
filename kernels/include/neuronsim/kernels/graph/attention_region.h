#pragma once
// An attention region: the one kAttention op (lowering.h) of a neuronsim::sdpa node as the
// library's flash attention program (kernels/attention.h), its HBM addressed virtually.
#include <string>

#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/kernels/graph/lowering.h"

namespace neuronsim::kernels::graph {

/// Throws std::length_error when one batch's K^T and V do not fit `core`'s SBUF and
/// std::invalid_argument for operands the kernel does not take.
device::Program build_attention_region(const LoweredGraph& g, const Op& op, const std::string& name,
                                       const device::CoreParams& core);

}  // namespace neuronsim::kernels::graph
