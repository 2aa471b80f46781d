#pragma once
// The fusion pass: partitions a lowered graph's ops into regions, each one ISA program.
//
// Ops are visited in topological order and join the region of an input they consume when the
// result maps onto that region's tile space and no cycle between regions follows: elementwise
// chains, reductions and normalisations fuse with their producers and consumers (tile regions),
// pointwise consumers of a matmul become its epilogue (matmul regions). Views are metadata:
// reshapes of a region's value stay inside it, other views read what a region stored. Opaque
// nodes are regions of their own: eager (a device kernel of the eager backend, run inside the
// graph's launch) or host (no device kernel: the graph's launch is split around it).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/kernels/compiler/graph_ir.h"
#include "neuronsim/kernels/compiler/matmul_region.h"
#include "neuronsim/kernels/compiler/tile_program.h"

namespace neuronsim::kernels::compiler {

struct Region {
  // kAttention: one neuronsim::sdpa node as a flash attention program (kernels/attention.h).
  // kKernel: one node as its op-library program(s), built at compile time.
  enum class Kind { kTile, kMatmul, kEager, kHost, kAttention, kKernel };
  Kind kind = Kind::kTile;
  std::vector<int> ops;   // in topological order
  int segment = 0;        // launches are split at host regions
  std::vector<int> deps;  // regions whose results it reads
};

/// Regions the compiler emits programs for (they address HBM virtually and write it).
inline bool emits_program(Region::Kind k) {
  return k == Region::Kind::kTile || k == Region::Kind::kMatmul || k == Region::Kind::kAttention ||
         k == Region::Kind::kKernel;
}

struct Partition {
  std::vector<Region> regions;    // in launch order
  std::vector<int> region_of_op;  // -1: a view outside any region
  /// Per value: the region that writes it to HBM (-1: a graph input, a view, or on chip only).
  std::vector<int> stored_by;
  int segments = 1;
  /// Nodes the compiler must keep opaque before partitioning again (a composite whose
  /// temporaries would leave its region).
  std::vector<std::pair<int, std::string>> must_be_opaque;  // (node, why)
};

struct FusionOptions {
  /// SBUF bytes per partition a region may use (a half of SBUF: neighbours overlap).
  uint64_t sbuf_window = 0;
  /// PSUM banks a region may use (the whole core's: a region that needs more than a half
  /// window's runs alone); 0: not checked.
  uint32_t psum_banks = 0;
  uint64_t psum_bank_bytes = 0;
  size_t max_ops_per_region = 64;
};

Partition partition(const LoweredGraph& g, const FusionOptions& opt);

/// A region ready to emit: a tile program or a matmul with its epilogue, with the values it
/// loads and stores.
struct RegionSpec {
  bool matmul = false;
  TileProgramSpec tile;  // kTile: the program; kMatmul: the epilogue
  MatmulRegionSpec mm;
  std::vector<int> loads, stores;
};

/// Builds the spec of a tile or matmul region whose values in `stores` leave it (nullopt and a
/// reason when the ops do not share one tile space). HBM addresses are virtual_address(value).
std::optional<RegionSpec> build_region_spec(const LoweredGraph& g, const std::vector<int>& ops,
                                            const std::vector<int>& stores, std::string* why);

/// A short description of a region's ops ("addmm+gelu").
std::string region_label(const LoweredGraph& g, const Region& r);

/// The virtual HBM address a program uses for value `v` before launch, and its inverse.
uint64_t virtual_address(int value);
int virtual_value(uint64_t address);  // -1 when not virtual

}  // namespace neuronsim::kernels::compiler
