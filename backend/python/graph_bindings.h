#pragma once
// The graph compiler's entry points for torch.compile (python/neuronsim/torch_compile), bound into
// neuronsim._C: describe an FX graph, compile it into fused programs, run it.
#include <torch/csrc/utils/pybind.h>

namespace neuronsim::backend {

/// Adds _GraphBuilder, the compile and launch entry points and their statistics to the module.
void register_graph_bindings(pybind11::module_& m);

}  // namespace neuronsim::backend
