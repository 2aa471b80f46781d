#include "neuronsim/runtime/hbm_allocator.h"

#include <stdexcept>

namespace neuronsim::runtime {

HbmAllocator::HbmAllocator(uint64_t base, uint64_t capacity, uint64_t alignment)
    : base_(base), capacity_(capacity / alignment * alignment), align_(alignment) {
  if (capacity_ > 0) free_.emplace(base_, capacity_);
}

std::optional<uint64_t> HbmAllocator::allocate(uint64_t bytes) {
  const uint64_t size = round(bytes == 0 ? 1 : bytes);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
  }
  if (best == free_.end()) return std::nullopt;
  const uint64_t addr = best->first, left = best->second - size;
  free_.erase(best);
  if (left > 0) free_.emplace(addr + size, left);
  live_.emplace(addr, size);
  used_ += size;
  return addr;
}

void HbmAllocator::free(uint64_t address) {
  auto it = live_.find(address);
  if (it == live_.end()) throw std::invalid_argument("HbmAllocator::free: not a live segment");
  uint64_t addr = it->first, size = it->second;
  live_.erase(it);
  used_ -= size;
  auto next = free_.lower_bound(addr);
  if (next != free_.end() && addr + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(addr, size);
}

uint64_t HbmAllocator::largest_free() const {
  uint64_t best = 0;
  for (const auto& [a, s] : free_) best = s > best ? s : best;
  return best;
}

bool HbmAllocator::contains(uint64_t address, uint64_t bytes) const {
  auto it = live_.upper_bound(address);
  if (it == live_.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second;
}

}  // namespace neuronsim::runtime
