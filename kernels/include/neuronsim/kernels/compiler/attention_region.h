#pragma once
// An attention region: the one kAttention op (lowering.h) of a neuronsim::sdpa node as the
// library's flash attention program (kernels/attention.h), its HBM addressed virtually.
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/compiler/graph_ir.h"

namespace neuronsim::kernels::compiler {

/// Throws std::length_error when one batch's K^T and V do not fit `core`'s SBUF and
/// std::invalid_argument for operands the kernel does not take.
device_model::Program build_attention_region(const LoweredGraph& g, const Op& op,
                                             const std::string& name,
                                             const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::compiler
