#pragma once
// The lowered IR: each ATen node of a graph as ops the compiler's region emitters understand
// (pointwise expressions, reductions, matmuls, views), or opaque (it then runs with the eager
// backend's kernel inside the compiled graph, or on the host). Composite ops (softmax,
// layer_norm, their backward) expand into several ops joined by compiler temporaries. The op
// library's rules write it (lowerer.h); the compiler lowers a graph with them (compiler/lower.h).
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
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
    kKernel,     // the node as its op-library program (no fused rule), built at compile time
    kOpaque,     // the node as a whole, not compiled
  };
  Kind kind = Kind::kOpaque;
  int node = -1;
  std::vector<int> inputs;
  int output = -1;
  Expr expr;  // kPointwise: Arg::input(i) is inputs[i]
  device_model::ReduceOp reduce = device_model::ReduceOp::kAdd;
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

}  // namespace neuronsim::kernels::graph
