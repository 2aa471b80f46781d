#pragma once
// Lowering: each ATen node of a graph becomes IR ops the region emitters understand (pointwise
// expressions, reductions, matmuls, views), or stays opaque (it then runs with the eager
// backend's kernel inside the compiled graph, or on the host). Composite ops (softmax,
// layer_norm, their backward) expand into several ops joined by compiler temporaries.
#include <string>
#include <vector>

#include "neuronsim/device/isa.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/graph/graph.h"

namespace neuronsim::kernels::graph {

struct Op {
  enum class Kind {
    kView,       // output aliases inputs[0]; its layout is the output value's meta
    kPointwise,  // output = expr(inputs...) with inputs broadcast to the output's shape
    kReduce,     // output = reduce(inputs[0]) over `dims`
    kMatmul,     // output[..., m, n] = sum_k inputs[0][..., m, k] * inputs[1][..., k, n]
    kAttention,  // output = softmax(q @ k^T * scale [+ mask] [causal]) @ v, inputs {q, k, v[,
                 // mask]}
    kOpaque,     // the node as a whole, not compiled
  };
  Kind kind = Kind::kOpaque;
  int node = -1;
  std::vector<int> inputs;
  int output = -1;
  Expr expr;  // kPointwise: Arg::input(i) is inputs[i]
  device::ReduceOp reduce = device::ReduceOp::kAdd;
  std::vector<int64_t> dims;  // kReduce: reduced dims of inputs[0], sorted
  float scale = 1.0f;         // kReduce: multiplies the result (mean); kAttention: of q @ k^T
  bool causal = false;        // kAttention: key j masked for query i when j > i
  bool nonzero = false;       // kReduce: reduce (x != 0) instead of x (any/all)
  std::string reason;         // kOpaque: why the node is not compiled
};

struct LoweredGraph {
  Graph graph;          // the input graph plus compiler temporaries
  std::vector<Op> ops;  // in topological order
  /// Per value: the value whose memory it lives in (itself unless it is a view or an in-place
  /// result). Dependencies between programs follow these roots.
  std::vector<int> root;
};

/// Lowers every node. `opaque_nodes[i]` keeps node i opaque (the compiler retries with a
/// composite node opaque when its parts could not share one region).
LoweredGraph lower(const Graph& g, const std::vector<bool>& opaque_nodes = {});

}  // namespace neuronsim::kernels::graph
