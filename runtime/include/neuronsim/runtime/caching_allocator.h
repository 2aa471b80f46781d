#pragma once
// A caching allocator over one device's HBM, modelled on PyTorch's CUDA caching allocator:
// allocations round to 512 bytes; small ones (<= 1 MiB) are carved from 2 MiB segments, larger
// ones from 20 MiB segments (< 10 MiB) or their own segment (rounded to 2 MiB); freed blocks stay
// cached and coalesce with free neighbours; on a failed segment allocation the cache is released
// and the allocation retried before reporting out of memory. Statistics use CUDA's names.
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuronsim/runtime/hbm_allocator.h"

namespace neuronsim::runtime {

struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n) {
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    current -= n;
    freed += n;
  }
};

enum StatType { kAggregate = 0, kSmallPool = 1, kLargePool = 2 };
using StatArray = std::array<Stat, 3>;

struct AllocatorStats {
  StatArray allocation, segment, active, inactive_split;
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_device_alloc = 0, num_device_free = 0;
};

/// One block of a segment, as torch.cuda.memory_snapshot() describes it.
struct BlockInfo {
  uint64_t address = 0, size = 0, requested_size = 0;
  bool allocated = false;
};
/// One segment (a device allocation the cache holds) and its blocks in address order.
struct SegmentInfo {
  uint64_t address = 0, total_size = 0, allocated_size = 0, requested_size = 0;
  bool small = false;
  std::vector<BlockInfo> blocks;
};

class CachingAllocator {
 public:
  CachingAllocator(HbmAllocator& device, std::string device_name);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// Returns an HBM address; throws device_model::OutOfMemoryError with a CUDA-style message.
  uint64_t allocate(uint64_t bytes);
  void free(uint64_t address);
  /// Returns every fully free segment to the device allocator.
  void empty_cache();

  const AllocatorStats& stats() const { return stats_; }
  void reset_peak_stats();
  void reset_accumulated_stats();
  /// (free, total) as the device sees it: cached-but-unused memory is not free.
  std::pair<uint64_t, uint64_t> mem_info() const;
  /// Every segment with its blocks, in address order (HBM addresses).
  std::vector<SegmentInfo> snapshot() const;
  /// Size of the live block at `address` (0 if none).
  uint64_t block_size(uint64_t address) const;

 private:
  struct Block {
    uint64_t addr = 0, size = 0, requested = 0;
    bool allocated = false, small = false;
    Block *prev = nullptr, *next = nullptr;  // neighbours within the segment
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->addr < b->addr;
    }
  };
  using Pool = std::set<Block*, BySize>;

  Block* take_from_pool(Pool& pool, uint64_t size);
  Block* new_segment(uint64_t segment_size, bool small);
  void release_free_segments(Pool& pool);
  [[noreturn]] void out_of_memory(uint64_t requested, uint64_t rounded);

  HbmAllocator& device_;
  std::string name_;
  Pool small_, large_;
  std::unordered_map<uint64_t, Block*> live_;
  AllocatorStats stats_;
};

}  // namespace neuronsim::runtime
