#include "hazards.h"

#include <algorithm>
#include <map>

namespace neuronsim::kernels::nki {
namespace {
// Bucket widths: an access is filed under every bucket its byte range touches.
constexpr int64_t kChipBucket = 2048;
constexpr int64_t kHbmBucket = 64 * 1024;
// Past this many entries a bucket drops dead ones, then merges what is left per stream (a
// conservative summary: a merged access covers the union of its parts).
constexpr size_t kCompactAt = 64;
constexpr size_t kMergeAt = 256;

bool overlaps(const Region& a, const Region& b) {
  return a.p0 < b.p1 && b.p0 < a.p1 && a.lo < b.hi && b.lo < a.hi;
}
bool covers(const Region& outer, const Region& inner) {
  return outer.p0 <= inner.p0 && inner.p1 <= outer.p1 && outer.lo <= inner.lo &&
         inner.hi <= outer.hi;
}
}  // namespace

Region region_of(const device_model::AccessPattern& ap) {
  const auto span = ap.byte_span();
  Region r;
  r.space = ap.space;
  if (ap.space != device_model::MemSpace::kHbm) {
    r.p0 = ap.start_partition;
    r.p1 = ap.start_partition + ap.partitions;
  }
  r.lo = span.lo;
  r.hi = span.hi;
  return r;
}

std::vector<HazardTracker::Bucket>& HazardTracker::buckets(device_model::MemSpace s) {
  return s == device_model::MemSpace::kSbuf ? sbuf_ : psum_;
}

void HazardTracker::for_buckets(const Region& r, auto&& fn) {
  if (r.hi <= r.lo) return;
  if (r.space == device_model::MemSpace::kHbm) {
    for (int64_t b = r.lo / kHbmBucket; b <= (r.hi - 1) / kHbmBucket; ++b) fn(hbm_[b]);
    return;
  }
  auto& v = buckets(r.space);
  const auto last = static_cast<size_t>((r.hi - 1) / kChipBucket);
  if (v.size() <= last) v.resize(last + 1);
  for (size_t b = static_cast<size_t>(std::max<int64_t>(0, r.lo) / kChipBucket); b <= last; ++b) {
    fn(v[b]);
  }
}

void HazardTracker::dependences(const Region& r, bool write, uint32_t stream,
                                std::vector<uint64_t>& need) {
  for_buckets(r, [&](Bucket& b) {
    for (uint32_t i : b) {
      const Access& a = accesses_[i];
      if (!a.live || a.stream == stream || !(write || a.write) || a.r.space != r.space ||
          !overlaps(a.r, r)) {
        continue;
      }
      if (need.size() <= a.stream) need.resize(a.stream + 1, 0);
      need[a.stream] = std::max(need[a.stream], a.seq);
    }
  });
}

void HazardTracker::compact(Bucket& b) {
  std::erase_if(b, [&](uint32_t i) { return !accesses_[i].live; });
  if (b.size() <= kMergeAt) return;
  // One summary per (stream, write): the union of its accesses, the latest sequence number.
  std::map<std::pair<uint32_t, bool>, Access> merged;
  for (uint32_t i : b) {
    const Access& a = accesses_[i];
    auto [it, fresh] = merged.try_emplace({a.stream, a.write}, a);
    if (!fresh) {
      Access& m = it->second;
      m.r.p0 = std::min(m.r.p0, a.r.p0);
      m.r.p1 = std::max(m.r.p1, a.r.p1);
      m.r.lo = std::min(m.r.lo, a.r.lo);
      m.r.hi = std::max(m.r.hi, a.r.hi);
      m.seq = std::max(m.seq, a.seq);
    }
  }
  b.clear();
  for (auto& [key, a] : merged) {
    // The summary lives in this bucket only (other buckets keep the originals).
    a.live = true;
    b.push_back(static_cast<uint32_t>(accesses_.size()));
    accesses_.push_back(a);
  }
}

void HazardTracker::record(const Region& r, bool write, uint32_t stream, uint64_t seq) {
  if (r.hi <= r.lo) return;
  const auto id = static_cast<uint32_t>(accesses_.size());
  accesses_.push_back({r, write, true, stream, seq});
  for_buckets(r, [&](Bucket& b) {
    // An access this one covers is implied by it from now on: a write (which waited for every
    // conflicting access) covers everything; a read covers its stream's earlier reads.
    for (uint32_t i : b) {
      Access& a = accesses_[i];
      if (a.live && a.r.space == r.space && covers(r, a.r) &&
          (write || (!a.write && a.stream == stream))) {
        a.live = false;
      }
    }
    b.push_back(id);
    if (b.size() > kCompactAt) compact(b);
  });
}

}  // namespace neuronsim::kernels::nki
