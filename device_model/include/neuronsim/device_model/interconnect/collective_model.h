#pragma once
// How long a collective takes on a process group's NeuronCores. An algorithm (ring, mesh,
// hierarchical) becomes a schedule of steps, each a set of concurrent transfers; a step lasts
// the latency of its slowest path plus the time its busiest resource needs for the bytes routed
// through it (a received chunk that is reduced loads the receiver's DMA 1/reduce_throughput_factor
// times, as the DMA engines reduce at that fraction of their copy rate). A collective costs the
// launch overhead plus its steps. Torch-free; the numbers come from InterconnectParams.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "neuronsim/device_model/interconnect/topology.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device_model::interconnect {

enum class Kind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
  kSendRecv,
};
const char* kind_name(Kind k);

/// One collective as every rank of the group sees it.
struct CollectiveDesc {
  Kind kind = Kind::kAllReduce;
  /// nccl-tests' "size": the buffer of all_reduce, broadcast, reduce and send/recv; the output
  /// of all_gather and gather; the input of reduce_scatter and scatter; one rank's input of
  /// all_to_all.
  uint64_t bytes = 0;
  /// all_to_all with uneven splits: bytes rank i sends rank j at [i * size + j]; empty = even.
  std::vector<uint64_t> matrix;
  uint32_t root = 0;  // broadcast, reduce, gather, scatter; the sender of send/recv
  uint32_t peer = 0;  // the receiver of send/recv
};

/// The algorithm a collective runs: the one inside an instance, staged hierarchically or not.
struct Plan {
  Algorithm algorithm = Algorithm::kRing;  // ring or mesh
  bool hierarchical = false;
  std::string name() const;  // "ring", "mesh", "hierarchical ring" ...
};

struct CollectiveCost {
  sim::SimTime duration;
  Plan plan;
  uint32_t steps = 0;
};

/// One transfer of a schedule step (group ranks).
struct Transfer {
  uint32_t src = 0, dst = 0;
  double bytes = 0;
  bool reduce = false;  // the receiver reduces the chunk into its buffer
};
using Step = std::vector<Transfer>;

class CollectiveModel {
 public:
  explicit CollectiveModel(Topology topology);

  const Topology& topology() const { return topology_; }
  /// What collectives.algorithm and collectives.inter_instance resolve to for this collective.
  Plan choose(const CollectiveDesc& d) const;
  /// The steps of a plan.
  std::vector<Step> schedule(const CollectiveDesc& d, const Plan& plan) const;
  /// The collective's simulated duration; repeated even-sized collectives are cached.
  CollectiveCost cost(const CollectiveDesc& d);
  /// One step's duration.
  sim::SimTime step_time(const Step& s) const;

 private:
  bool symmetric_instances() const;
  std::vector<Step> flat(const CollectiveDesc& d, Algorithm a) const;
  std::vector<Step> hierarchical(const CollectiveDesc& d, Algorithm a) const;

  Topology topology_;
  std::vector<uint32_t> ring_;  // every rank, in ring order
  std::map<std::tuple<int, uint64_t, uint32_t, uint32_t>, CollectiveCost> cache_;
};

}  // namespace neuronsim::device_model::interconnect
