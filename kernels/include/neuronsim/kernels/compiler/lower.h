#pragma once
// Lowering a graph: each node becomes IR ops through its op-library rule (kernels/ops/op_rule.h:
// its lowering, or its expression as one pointwise op), or stays opaque with the reason.
#include <string>
#include <vector>

#include "neuronsim/kernels/compiler/graph_ir.h"

namespace neuronsim::kernels::compiler {

/// Lowers every node. `opaque_nodes[i]` keeps node i opaque (the compiler retries with a
/// composite node opaque when its parts could not share one region). A non-empty
/// `kernel_nodes[i]` keeps node i whole as its op-library program (Op::Kind::kKernel) for that
/// reason, when the library can build one (the compiler's choice of the library's matmul over a
/// fused matmul region).
LoweredGraph lower(const Graph& g, const std::vector<bool>& opaque_nodes = {},
                   const std::vector<std::string>& kernel_nodes = {});

}  // namespace neuronsim::kernels::compiler
