#pragma once
// Bytes of SBUF or PSUM written by the running program: the union of the rectangles
// (partitions x byte ranges) its instructions wrote. Feeds the occupancy counter tracks.
#include <cstdint>
#include <map>
#include <vector>

namespace neuronsim::device_model {

class OccupancyTracker {
 public:
  explicit OccupancyTracker(uint32_t partitions) : per_partition_(partitions) {}
  void reset() {
    if (!dirty_) return;  // a launch resets both trackers; most programs use one or neither
    for (auto& m : per_partition_) m.clear();
    total_ = 0;
    dirty_ = false;
  }
  /// Marks [lo, hi) of partitions [p0, p1) as written; returns the new total.
  uint64_t add(uint32_t p0, uint32_t p1, uint64_t lo, uint64_t hi);
  uint64_t total() const { return total_; }

 private:
  // Per partition: disjoint intervals lo -> hi.
  std::vector<std::map<uint64_t, uint64_t>> per_partition_;
  uint64_t total_ = 0;
  bool dirty_ = false;  // an interval was added since the last reset
};

}  // namespace neuronsim::device_model
