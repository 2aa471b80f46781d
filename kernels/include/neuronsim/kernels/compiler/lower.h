#pragma once
// Lowering a graph: each node becomes IR ops through its op-library rule (kernels/ops/op_rule.h:
// its lowering, or its expression as one pointwise op), or stays opaque with the reason.
#include <vector>

#include "neuronsim/kernels/compiler/graph_ir.h"

namespace neuronsim::kernels::compiler {

/// Lowers every node. `opaque_nodes[i]` keeps node i opaque (the compiler retries with a
/// composite node opaque when its parts could not share one region).
LoweredGraph lower(const Graph& g, const std::vector<bool>& opaque_nodes = {});

}  // namespace neuronsim::kernels::compiler
