#pragma once
// A process group's ranks on the interconnect: which resources a transfer between two ranks
// occupies and how long its first byte takes. Resources are the ranks' collective DMA (each
// way), the directed NeuronLinks of each instance's 2-D torus (dimension-order routing, the
// shorter way round each ring) and each chip's share of its instance's network bandwidth (each
// way). Torch-free.
#include <cstdint>
#include <vector>

#include "neuronsim/device_model/interconnect/interconnect.h"

namespace neuronsim::device_model::interconnect {

/// The resources a transfer crosses and the latency of its path.
struct Route {
  std::vector<uint32_t> resources;  // ids into Topology::bandwidth()
  uint32_t link_hops = 0;           // NeuronLink hops (chip to chip inside an instance)
  bool crosses_network = false;     // between instances
};

class Topology {
 public:
  /// Ranks in group order. Throws device_model::ConfigError for a core outside the instance or two
  /// ranks on one NeuronCore.
  Topology(const InterconnectParams& params, std::vector<RankPlace> ranks);

  uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }
  const RankPlace& place(uint32_t rank) const { return ranks_.at(rank); }
  uint32_t chip_of(uint32_t rank) const { return ranks_.at(rank).core / params_.cores_per_chip; }
  const InterconnectParams& params() const { return params_; }

  Route route(uint32_t src, uint32_t dst) const;
  /// First-byte latency of a route: one algorithm step, plus routed hops, plus the network.
  double latency_ns(const Route& r) const;
  /// Bytes per second of each resource.
  const std::vector<double>& bandwidth() const { return bandwidth_; }
  /// A rank's inbound collective DMA (where received data is reduced).
  uint32_t dma_in(uint32_t rank) const { return 2 * rank + 1; }

  /// The given ranks in ring order: by instance, then chip along a Hamiltonian cycle of the
  /// torus (a snake over its rows), then core; consecutive chips are torus neighbours.
  std::vector<uint32_t> ring_order(const std::vector<uint32_t>& ranks) const;
  /// Distinct instances of the group, in order of first appearance.
  const std::vector<uint32_t>& instances() const { return instances_; }

 private:
  uint32_t instance_index(uint32_t instance) const;
  uint32_t link(uint32_t inst_index, uint32_t chip, uint32_t dir) const;
  uint32_t nic(uint32_t inst_index, uint32_t chip, bool out) const;
  uint32_t snake_position(uint32_t chip) const;

  InterconnectParams params_;
  std::vector<RankPlace> ranks_;
  std::vector<uint32_t> instances_;
  std::vector<double> bandwidth_;
  uint32_t link_base_ = 0, nic_base_ = 0;
};

}  // namespace neuronsim::device_model::interconnect
