#pragma once
// The graph compiler: lower -> partition into regions -> emit one program per region -> link the
// regions of each segment into one launch. A segment ends where a node must run on the host;
// nodes with an eager device kernel run inside their segment's launch (their programs are
// spliced in when the graph runs, since they may depend on data).
//
// When the fusion pass cannot place a composite node's parts in one region, or a region does
// not fit on chip, the nodes involved are kept opaque and the graph is partitioned again.
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/kernels/compiler/fusion.h"
#include "neuronsim/kernels/compiler/link.h"
#include "neuronsim/kernels/compiler/lower.h"

namespace neuronsim::kernels::compiler {

enum class NodeClass {
  kFused,   // computed by a fused region
  kView,    // metadata only
  kKernel,  // its op-library program (no fused rule for it), built at compile time
  kEager,   // the eager backend's device kernel, inside the launch
  kNative,  // a data-dependent op (indices drive its DMA): its device kernel, inside the launch
  kHost,    // on the host CPU, between launches
  kCpu,     // on CPU tensors only: host work that needs no device
};
const char* node_class_name(NodeClass c);

/// Ops whose data movement the indices they read decide (embedding and its backward, gather,
/// scatter, index_*): a program for them exists only once the indices are known, as the
/// device's runtime generates their DMA descriptors from the data. The compiler runs their
/// device kernels inside the launch (NodeClass::kNative), built when the graph runs.
bool data_dependent_op(const std::string& op);

struct Segment {
  /// Parts in launch order; an eager node's part is a placeholder (barrier) until the graph
  /// runs and its programs are known.
  std::vector<Part> parts;
  std::vector<int> eager_node;  // per part: the node whose programs fill it, or -1
  LinkedProgram linked;         // all parts linked, when there are no eager nodes
  bool prelinked = false;
  std::vector<int> values;  // values the parts address (relocation targets)
  int host_node = -1;       // the node that runs on the host after this segment (-1: the end)
};

struct CompiledGraph {
  std::string name;
  LoweredGraph lowered;
  Partition partition;
  std::vector<Segment> segments;
  std::vector<NodeClass> node_class;     // per graph node
  std::vector<int> node_region;          // per graph node: its region (-1: views)
  std::vector<std::string> node_reason;  // opaque nodes: why
  std::vector<std::string> region_name;
  std::vector<std::vector<int>> region_nodes;
  size_t instructions = 0;  // of the static parts
  int attempts = 1;         // partitioning rounds
};

struct CompileOptions {
  std::string name = "graph";
  size_t max_ops_per_region = 64;
  /// Whether a matmul region may become the library's matmul plus a region for the rest when
  /// the cost model bounds that faster (compiler.cpp: library_matmul_choice).
  bool library_matmuls = true;
};

/// Throws std::invalid_argument for a malformed graph; regions that fail to emit are not errors
/// (their nodes run with eager kernels), so a valid graph always compiles.
CompiledGraph compile_graph(const Graph& g, const device_model::CoreParams& core,
                            const CompileOptions& opt = {});

/// The core parameters a region is emitted against: `num`/`den` of SBUF and of the PSUM banks.
device_model::CoreParams window_params(const device_model::CoreParams& core, uint32_t num,
                                       uint32_t den);

}  // namespace neuronsim::kernels::compiler
