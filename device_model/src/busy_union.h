#pragma once
// The time a set of timelines had at least one interval open (a core's DMA queues together:
// "nc0.dma.busy_ps"), kept as they run. Intervals are added when they end, so in order of their
// ends: a new one merges with the recent blocks it overlaps. fold() adds the blocks to the
// statistic once no interval still running can reach back into them (a run's end).
#include <cstdint>
#include <utility>
#include <vector>

#include "neuronsim/sim/stats.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device_model {

class BusyUnion {
 public:
  void attach(sim::StatsRegistry::Counter* total) { total_ = total; }
  void add(sim::SimTime begin, sim::SimTime end) {
    uint64_t b = begin.ps;
    while (!blocks_.empty() && blocks_.back().second >= b) {
      b = std::min(b, blocks_.back().first);
      blocks_.pop_back();
    }
    blocks_.push_back({b, end.ps});
  }
  void fold() {
    for (const auto& [b, e] : blocks_) {
      if (total_) total_->add(e - b);
    }
    blocks_.clear();
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> blocks_;  // disjoint, by time
  sim::StatsRegistry::Counter* total_ = nullptr;
};

}  // namespace neuronsim::device_model
