#pragma once
// The interconnect a collective runs over, read from a preset: the instance's chips in a 2-D
// torus of NeuronLinks, each rank's collective DMA, the network (EFA) between instances, and the
// collective engine's fixed costs. Torch-free; every number comes from the Config.
#include <cstdint>
#include <string>

#include "neuronsim/device_model/config.h"

namespace neuronsim::device_model::interconnect {

/// How a collective's data moves between the ranks of one instance (collectives.algorithm).
enum class Algorithm {
  kAuto,  // mesh below collectives.mesh_max_bytes, ring from there on
  kRing,  // a ring over the ranks (ring order follows the torus): O(N) steps, links used fully
  kMesh,  // every rank writes to every other in one step: O(1) steps, links oversubscribed
};
const char* algorithm_name(Algorithm a);

/// How a group spanning instances runs (collectives.inter_instance).
enum class InterInstance {
  kHierarchical,  // the algorithm inside each instance, a ring between instances (internode doc)
  kFlat,          // the algorithm over all ranks at once
};

struct InterconnectParams {
  std::string instance_name;    // instance.name
  uint32_t chips = 1;           // instance.chips
  uint32_t torus_rows = 1;      // instance.torus_rows
  uint32_t torus_cols = 1;      // instance.torus_cols
  uint32_t cores_per_chip = 1;  // logical NeuronCores per chip (chip.cores / logical_core_size)

  double link_bytes_per_s = 0;     // neuronlink.link_bandwidth_gbps, per direction
  double link_hop_latency_ns = 0;  // neuronlink.hop_latency_ns, per routed chip-to-chip hop

  double network_bytes_per_s = 0;  // network.instance_bandwidth_gbps, shared by the chips
  double network_latency_ns = 0;   // network.latency_ns, per step that crosses instances

  Algorithm algorithm = Algorithm::kAuto;                       // collectives.algorithm
  InterInstance inter_instance = InterInstance::kHierarchical;  // collectives.inter_instance
  double launch_overhead_ns = 0;        // collectives.launch_overhead_ns, once per collective
  double step_latency_ns = 0;           // collectives.step_latency_ns, per algorithm step
  double dma_bytes_per_s = 0;           // collectives.dma_bandwidth_gbps, per rank each way
  double reduce_throughput_factor = 1;  // collectives.reduce_throughput_factor
  uint64_t mesh_max_bytes = 0;          // collectives.mesh_max_bytes

  /// Logical NeuronCores in one instance.
  uint32_t cores_per_instance() const { return chips * cores_per_chip; }
  /// Network bandwidth one chip's share of the instance's NICs gives.
  double network_bytes_per_s_per_chip() const { return network_bytes_per_s / chips; }
};

/// Reads the parameters above; a missing or out-of-range key is a ConfigError naming it.
InterconnectParams parse_interconnect_params(const device_model::Config& config);

/// A rank's NeuronCore: which instance, and which logical core of that instance.
struct RankPlace {
  uint32_t instance = 0;
  uint32_t core = 0;
  bool operator==(const RankPlace&) const = default;
};

}  // namespace neuronsim::device_model::interconnect
