#include "tile_allocator.h"

#include <algorithm>

namespace neuronsim::kernels::nki {
namespace {
uint64_t align_up(uint64_t v, uint64_t a) {
  return a <= 1 ? v : (v + a - 1) / a * a;
}
}  // namespace

TileAllocator::TileAllocator(uint64_t capacity, uint64_t align, uint64_t bank_bytes)
    : capacity_(capacity), align_(align), bank_(bank_bytes) {
  if (capacity_ > 0) free_[0] = capacity_;
}

std::optional<uint64_t> TileAllocator::fit(uint64_t start, uint64_t size, uint64_t bytes) const {
  const uint64_t end = start + size;
  uint64_t s = align_up(start, align_);
  if (bank_ > 0) {
    if (bytes > bank_) {
      s = align_up(s, bank_);
    } else if (s / bank_ != (s + bytes - 1) / bank_) {
      s = align_up(s, bank_);  // would straddle a bank: start at the next one
    }
  }
  if (s + bytes <= end) return s;
  return std::nullopt;
}

std::optional<uint64_t> TileAllocator::allocate(uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  // Next fit: the free ranges from the cursor on, then from the start.
  auto try_range = [&](std::map<uint64_t, uint64_t>::iterator it) -> std::optional<uint64_t> {
    const uint64_t lo = std::max(
        it->first, cursor_ > it->first && cursor_ < it->first + it->second ? cursor_ : it->first);
    auto s = fit(lo, it->first + it->second - lo, bytes);
    if (!s && lo != it->first) s = fit(it->first, it->second, bytes);
    return s;
  };
  std::optional<uint64_t> found;
  auto first = free_.upper_bound(cursor_);
  if (first != free_.begin()) {
    auto prev = std::prev(first);
    if (prev->first + prev->second > cursor_) first = prev;
  }
  for (auto it = first; it != free_.end() && !found; ++it) found = try_range(it);
  for (auto it = free_.begin(); it != first && !found; ++it) found = try_range(it);
  if (!found) return std::nullopt;
  const uint64_t s = *found;
  // Carve [s, s + bytes) out of its free range.
  auto it = std::prev(free_.upper_bound(s));
  const uint64_t r0 = it->first, r1 = it->first + it->second;
  free_.erase(it);
  if (s > r0) free_[r0] = s - r0;
  if (s + bytes < r1) free_[s + bytes] = r1 - (s + bytes);
  cursor_ = s + bytes >= capacity_ ? 0 : s + bytes;
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return s;
}

void TileAllocator::release(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  in_use_ -= std::min(in_use_, bytes);
  uint64_t lo = offset, hi = offset + bytes;
  auto next = free_.lower_bound(lo);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == lo) {
      lo = prev->first;
      free_.erase(prev);
    }
  }
  next = free_.lower_bound(hi);
  if (next != free_.end() && next->first == hi) {
    hi = next->first + next->second;
    free_.erase(next);
  }
  free_[lo] = hi - lo;
}

uint64_t TileAllocator::largest_free() const {
  uint64_t best = 0;
  for (const auto& [o, n] : free_) best = std::max(best, n);
  return best;
}

}  // namespace neuronsim::kernels::nki
