#pragma once
// The "driver" allocator of one device's HBM range: hands out aligned segments, coalesces on free.
// The caching allocator (caching_allocator.h) sits on top, as PyTorch's sits on cudaMalloc.
#include <cstdint>
#include <map>
#include <optional>

namespace neuronsim::runtime {

class HbmAllocator {
 public:
  HbmAllocator(uint64_t base, uint64_t capacity, uint64_t alignment = 4096);

  /// Best fit; nullopt when no free range is large enough.
  std::optional<uint64_t> allocate(uint64_t bytes);
  /// Frees a segment returned by allocate(); throws std::invalid_argument for anything else.
  void free(uint64_t address);

  uint64_t base() const { return base_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  uint64_t largest_free() const;
  /// True when [address, address + bytes) lies inside one live segment.
  bool contains(uint64_t address, uint64_t bytes) const;
  uint64_t round(uint64_t bytes) const { return (bytes + align_ - 1) / align_ * align_; }

 private:
  uint64_t base_, capacity_, align_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // address -> size
  std::map<uint64_t, uint64_t> live_;  // address -> size
};

}  // namespace neuronsim::runtime
