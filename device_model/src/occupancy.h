#pragma once
// Bytes of SBUF or PSUM written by the running program: the union of the rectangles
// (partitions x byte ranges) its instructions wrote. Feeds the occupancy counter tracks.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace neuronsim::device_model {

class OccupancyTracker {
 public:
  explicit OccupancyTracker(uint32_t partitions) : partitions_(partitions) { reset_bands(); }
  void reset() {
    if (!dirty_) return;  // a launch resets both trackers; most programs use one or neither
    reset_bands();
    total_ = 0;
    dirty_ = false;
  }
  /// Marks [lo, hi) of partitions [p0, p1) as written; returns the new total.
  uint64_t add(uint32_t p0, uint32_t p1, uint64_t lo, uint64_t hi);
  uint64_t total() const { return total_; }

 private:
  // Partitions [previous band's end, end) written alike: their disjoint byte intervals, sorted.
  // Instructions mostly write whole partition ranges, so a program makes a handful of bands
  // whatever its instruction count (one interval set per partition made every write allocate).
  struct Band {
    uint32_t end;
    std::vector<std::pair<uint64_t, uint64_t>> intervals;
  };
  void reset_bands() {
    bands_.clear();
    bands_.push_back({partitions_, {}});
  }
  // The index of the band starting at partition p (splitting one that spans it).
  size_t split_at(uint32_t p);
  uint32_t partitions_;
  std::vector<Band> bands_;
  uint64_t total_ = 0;
  bool dirty_ = false;  // an interval was added since the last reset
};

}  // namespace neuronsim::device_model
