#include "occupancy.h"

#include <algorithm>

namespace neuronsim::device_model {

uint64_t OccupancyTracker::add(uint32_t p0, uint32_t p1, uint64_t lo, uint64_t hi) {
  p1 = std::min<uint32_t>(p1, static_cast<uint32_t>(per_partition_.size()));
  dirty_ = true;
  for (uint32_t p = p0; p < p1; ++p) {
    auto& m = per_partition_[p];
    uint64_t nlo = lo, nhi = hi;
    // Merge with every interval overlapping or touching [lo, hi).
    auto it = m.upper_bound(nlo);
    if (it != m.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= nlo) it = prev;
    }
    while (it != m.end() && it->first <= nhi) {
      nlo = std::min(nlo, it->first);
      nhi = std::max(nhi, it->second);
      total_ -= it->second - it->first;
      it = m.erase(it);
    }
    m.emplace(nlo, nhi);
    total_ += nhi - nlo;
  }
  return total_;
}

}  // namespace neuronsim::device_model
