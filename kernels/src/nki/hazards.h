#pragma once
// Data dependences between the streams of a kernel being expanded, by address: each access is a
// partition range and byte range of SBUF, PSUM or HBM; a new access must wait for the earlier
// accesses of other streams it conflicts with (read after write, write after read, write after
// write). Accesses on one stream are ordered by the stream itself. Buffer reuse needs no special
// case: the addresses carry the history.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"

namespace neuronsim::kernels::nki {

struct Region {
  device_model::MemSpace space = device_model::MemSpace::kSbuf;
  uint32_t p0 = 0, p1 = 1;  // partitions [p0, p1) (SBUF/PSUM; HBM: 0, 1)
  int64_t lo = 0, hi = 0;   // bytes [lo, hi) within a partition (SBUF/PSUM) or of HBM
};

/// The region an access pattern touches (its bounding box).
Region region_of(const device_model::AccessPattern& ap);

class HazardTracker {
 public:
  /// For each other stream, the latest of its instructions (1-based sequence number) the access
  /// must wait for; `need[s]` is raised, never lowered.
  void dependences(const Region& r, bool write, uint32_t stream, std::vector<uint64_t>& need);
  /// Records an access by `stream`'s instruction `seq`.
  void record(const Region& r, bool write, uint32_t stream, uint64_t seq);

 private:
  struct Access {
    Region r;
    bool write;
    bool live;
    uint32_t stream;
    uint64_t seq;
  };
  using Bucket = std::vector<uint32_t>;  // indices into accesses_
  std::vector<Bucket>& buckets(device_model::MemSpace s);
  void for_buckets(const Region& r, auto&& fn);
  void compact(Bucket& b);

  std::vector<Access> accesses_;
  std::vector<Bucket> sbuf_, psum_;
  std::unordered_map<int64_t, Bucket> hbm_;
};

}  // namespace neuronsim::kernels::nki
