#include "occupancy.h"

#include <algorithm>

namespace neuronsim::device_model {
namespace {

// Merges [lo, hi) into sorted disjoint intervals (touching ones join); returns the bytes added.
uint64_t merge(std::vector<std::pair<uint64_t, uint64_t>>& v, uint64_t lo, uint64_t hi) {
  auto first = std::lower_bound(v.begin(), v.end(), lo,
                                [](const auto& iv, uint64_t x) { return iv.second < x; });
  uint64_t nlo = lo, nhi = hi, removed = 0;
  auto last = first;
  while (last != v.end() && last->first <= nhi) {
    nlo = std::min(nlo, last->first);
    nhi = std::max(nhi, last->second);
    removed += last->second - last->first;
    ++last;
  }
  if (first == last) {
    v.insert(first, {nlo, nhi});
  } else {
    *first = {nlo, nhi};
    v.erase(first + 1, last);
  }
  return (nhi - nlo) - removed;
}

}  // namespace

size_t OccupancyTracker::split_at(uint32_t p) {
  uint32_t begin = 0;
  for (size_t i = 0; i < bands_.size(); ++i) {
    if (begin == p) return i;
    if (p < bands_[i].end) {
      Band head{p, bands_[i].intervals};
      bands_.insert(bands_.begin() + static_cast<std::ptrdiff_t>(i), std::move(head));
      return i + 1;
    }
    begin = bands_[i].end;
  }
  return bands_.size();
}

uint64_t OccupancyTracker::add(uint32_t p0, uint32_t p1, uint64_t lo, uint64_t hi) {
  p1 = std::min(p1, partitions_);
  if (p0 >= p1) return total_;
  dirty_ = true;
  const size_t first = split_at(p0);
  const size_t last = split_at(p1);
  uint32_t begin = first > 0 ? bands_[first - 1].end : 0;
  for (size_t i = first; i < last; ++i) {
    total_ += merge(bands_[i].intervals, lo, hi) * (bands_[i].end - begin);
    begin = bands_[i].end;
  }
  // Bands written alike again become one (a split by a narrow write, then a full-width one).
  for (size_t i = 0; i + 1 < bands_.size();) {
    if (bands_[i].intervals == bands_[i + 1].intervals) {
      bands_[i].end = bands_[i + 1].end;
      bands_.erase(bands_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    } else {
      ++i;
    }
  }
  return total_;
}

}  // namespace neuronsim::device_model
