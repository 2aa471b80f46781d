#pragma once
// The graph IR's names (kernels/graph/), used unqualified throughout the compiler.
#include "neuronsim/kernels/graph/graph.h"
#include "neuronsim/kernels/graph/lowering.h"

namespace neuronsim::kernels::compiler {

using graph::Arg;
using graph::contiguous_strides;
using graph::Graph;
using graph::LoweredGraph;
using graph::Node;
using graph::Op;
using graph::TensorMeta;
using graph::Value;
using graph::view_strides;

}  // namespace neuronsim::kernels::compiler
