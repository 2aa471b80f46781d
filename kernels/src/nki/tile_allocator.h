#pragma once
// Per-partition byte ranges of SBUF or PSUM handed to tile instances as a traced kernel expands.
// Next fit: the search starts where the previous allocation ended, so a tile declared in a loop
// body gets a different buffer in consecutive iterations while space lasts (the overlap a
// multi-buffered allocation gives the NKI compiler's schedule) instead of waiting for the
// previous iteration's readers. PSUM tiles never straddle a bank (one matmul accumulation group
// per bank); tiles of more than a bank start on a bank boundary.
#include <cstdint>
#include <map>
#include <optional>

namespace neuronsim::kernels::nki {

class TileAllocator {
 public:
  /// `bank_bytes` 0: no bank structure (SBUF).
  TileAllocator(uint64_t capacity, uint64_t align, uint64_t bank_bytes);

  /// Offset of `bytes` free bytes (per partition), or none when no free range fits.
  std::optional<uint64_t> allocate(uint64_t bytes);
  void release(uint64_t offset, uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const { return in_use_; }
  uint64_t peak() const { return peak_; }
  /// The largest free range (for messages).
  uint64_t largest_free() const;

 private:
  std::optional<uint64_t> fit(uint64_t start, uint64_t size, uint64_t bytes) const;
  uint64_t capacity_, align_, bank_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  uint64_t cursor_ = 0;
  uint64_t in_use_ = 0, peak_ = 0;
};

}  // namespace neuronsim::kernels::nki
