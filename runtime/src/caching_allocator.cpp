#include "neuronsim/runtime/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>

#include "neuronsim/device_model/errors.h"

namespace neuronsim::runtime {
namespace {

constexpr uint64_t kRound = 512;
constexpr uint64_t kSmallSize = 1 << 20;     // <= 1 MiB: small pool
constexpr uint64_t kSmallBuffer = 2 << 20;   // small pool segments
constexpr uint64_t kLargeBuffer = 20 << 20;  // segments for 1..10 MiB requests
constexpr uint64_t kMinLargeAlloc = 10 << 20;
constexpr uint64_t kRoundLarge = 2 << 20;

uint64_t round_size(uint64_t n) {
  return n < kRound ? kRound : (n + kRound - 1) / kRound * kRound;
}

std::string gib(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", v / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", v / (1ull << 20));
  return fmt::format("{:.2f} KiB", v / 1024);
}

void update(StatArray& a, bool small, int64_t n) {
  for (int t : {static_cast<int>(kAggregate),
                small ? static_cast<int>(kSmallPool) : static_cast<int>(kLargePool)}) {
    if (n >= 0)
      a[t].increase(n);
    else
      a[t].decrease(-n);
  }
}

}  // namespace

CachingAllocator::CachingAllocator(HbmAllocator& device, std::string name)
    : device_(device), name_(std::move(name)) {}

CachingAllocator::~CachingAllocator() {
  for (auto& [a, b] : live_) delete b;
  for (Block* b : small_) delete b;
  for (Block* b : large_) delete b;
}

CachingAllocator::Block* CachingAllocator::take_from_pool(Pool& pool, uint64_t size) {
  Block key;
  key.size = size;
  key.addr = 0;
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(uint64_t segment_size, bool small) {
  auto addr = device_.allocate(segment_size);
  if (!addr) {
    ++stats_.num_alloc_retries;
    empty_cache();
    addr = device_.allocate(segment_size);
    if (!addr) return nullptr;
  }
  ++stats_.num_device_alloc;
  Block* b = new Block;
  b->addr = *addr;
  b->size = segment_size;
  b->small = small;
  update(stats_.segment, small, 1);
  update(stats_.reserved_bytes, small, static_cast<int64_t>(segment_size));
  return b;
}

uint64_t CachingAllocator::allocate(uint64_t requested) {
  const uint64_t size = round_size(requested);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_ : large_;
  Block* b = take_from_pool(pool, size);
  if (b && (b->prev || b->next)) {
    update(stats_.inactive_split, small, -1);
    update(stats_.inactive_split_bytes, small, -static_cast<int64_t>(b->size));
  }
  if (!b) {
    const uint64_t seg =
        small ? kSmallBuffer
              : (size < kMinLargeAlloc ? kLargeBuffer
                                       : (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge);
    b = new_segment(seg, small);
    if (!b) out_of_memory(requested, size);
  }
  // Split off the remainder when it is worth keeping.
  const uint64_t rest = b->size - size;
  if ((small && rest >= kRound) || (!small && rest > kSmallSize)) {
    Block* r = new Block;
    r->addr = b->addr + size;
    r->size = rest;
    r->small = small;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool.insert(r);
    update(stats_.inactive_split, small, 1);
    update(stats_.inactive_split_bytes, small, static_cast<int64_t>(rest));
  }
  b->allocated = true;
  b->requested = requested;
  live_[b->addr] = b;
  update(stats_.allocation, small, 1);
  update(stats_.active, small, 1);
  update(stats_.allocated_bytes, small, static_cast<int64_t>(b->size));
  update(stats_.active_bytes, small, static_cast<int64_t>(b->size));
  update(stats_.requested_bytes, small, static_cast<int64_t>(requested));
  return b->addr;
}

void CachingAllocator::free(uint64_t address) {
  auto it = live_.find(address);
  if (it == live_.end()) return;
  Block* b = it->second;
  live_.erase(it);
  const bool small = b->small;
  update(stats_.allocation, small, -1);
  update(stats_.active, small, -1);
  update(stats_.allocated_bytes, small, -static_cast<int64_t>(b->size));
  update(stats_.active_bytes, small, -static_cast<int64_t>(b->size));
  update(stats_.requested_bytes, small, -static_cast<int64_t>(b->requested));
  b->allocated = false;
  Pool& pool = small ? small_ : large_;
  // Coalesce with free neighbours.
  for (Block* n : {b->prev, b->next}) {
    if (!n || n->allocated) continue;
    pool.erase(n);
    update(stats_.inactive_split, small, -1);
    update(stats_.inactive_split_bytes, small, -static_cast<int64_t>(n->size));
    if (n == b->prev) {
      n->size += b->size;
      n->next = b->next;
      if (b->next) b->next->prev = n;
      delete b;
      b = n;
    } else {
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
  }
  if (b->prev || b->next) {
    update(stats_.inactive_split, small, 1);
    update(stats_.inactive_split_bytes, small, static_cast<int64_t>(b->size));
  }
  pool.insert(b);
}

void CachingAllocator::release_free_segments(Pool& pool) {
  for (auto it = pool.begin(); it != pool.end();) {
    Block* b = *it;
    if (b->prev || b->next) {
      ++it;
      continue;
    }
    device_.free(b->addr);
    ++stats_.num_device_free;
    update(stats_.segment, b->small, -1);
    update(stats_.reserved_bytes, b->small, -static_cast<int64_t>(b->size));
    it = pool.erase(it);
    delete b;
  }
}

void CachingAllocator::empty_cache() {
  release_free_segments(small_);
  release_free_segments(large_);
}

void CachingAllocator::reset_peak_stats() {
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& s : *a) s.peak = s.current;
  }
}

void CachingAllocator::reset_accumulated_stats() {
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
    for (Stat& s : *a) s.allocated = s.freed = 0;
  }
  stats_.num_alloc_retries = stats_.num_ooms = stats_.num_device_alloc = stats_.num_device_free = 0;
}

std::pair<uint64_t, uint64_t> CachingAllocator::mem_info() const {
  return {device_.free_bytes(), device_.capacity()};
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  // A segment's first block has no previous neighbour; its blocks follow through `next`.
  std::vector<const Block*> heads;
  for (const auto& [a, b] : live_) {
    if (!b->prev) heads.push_back(b);
  }
  for (const Pool* pool : {&small_, &large_}) {
    for (const Block* b : *pool) {
      if (!b->prev) heads.push_back(b);
    }
  }
  std::sort(heads.begin(), heads.end(),
            [](const Block* a, const Block* b) { return a->addr < b->addr; });
  std::vector<SegmentInfo> out;
  out.reserve(heads.size());
  for (const Block* h : heads) {
    SegmentInfo seg;
    seg.address = h->addr;
    seg.small = h->small;
    for (const Block* b = h; b; b = b->next) {
      seg.blocks.push_back({b->addr, b->size, b->allocated ? b->requested : 0, b->allocated});
      seg.total_size += b->size;
      if (b->allocated) {
        seg.allocated_size += b->size;
        seg.requested_size += b->requested;
      }
    }
    out.push_back(std::move(seg));
  }
  return out;
}

uint64_t CachingAllocator::block_size(uint64_t address) const {
  auto it = live_.find(address);
  return it == live_.end() ? 0 : it->second->size;
}

void CachingAllocator::out_of_memory(uint64_t requested, uint64_t rounded) {
  ++stats_.num_ooms;
  const uint64_t allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  const uint64_t reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  const std::string msg = fmt::format(
      "NEURON out of memory. Tried to allocate {}. {} has a total capacity of {} of which {} is "
      "free. Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch "
      "but unallocated.",
      gib(requested), name_, gib(device_.capacity()), gib(device_.free_bytes()), gib(allocated),
      gib(reserved - allocated));
  (void)rounded;
  throw device_model::OutOfMemoryError(requested, device_.free_bytes(), device_.capacity(), msg,
                                       true);
}

}  // namespace neuronsim::runtime
