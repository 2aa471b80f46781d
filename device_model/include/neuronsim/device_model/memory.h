#pragma once
// Storage for the simulated memories. Function only: no timing lives here.
// HBM is host-addressable (one anonymous mapping, committed lazily by the OS), so host code can
// read and write device memory directly: copies, the CPU fallback and tests need no staging.
#include <cstdint>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"

namespace neuronsim::device_model {

/// The HBM of every elaborated stack as one flat address range: stack s covers
/// [s * stack_capacity, (s + 1) * stack_capacity).
class HbmStorage {
 public:
  HbmStorage(uint64_t stack_capacity, uint32_t stacks);
  ~HbmStorage();
  HbmStorage(const HbmStorage&) = delete;
  HbmStorage& operator=(const HbmStorage&) = delete;

  uint8_t* data() { return base_; }
  uint64_t capacity() const { return stack_capacity_ * stacks_; }
  uint64_t stack_capacity() const { return stack_capacity_; }
  uint32_t stacks() const { return stacks_; }
  uint32_t stack_of(uint64_t address) const {
    return static_cast<uint32_t>(address / stack_capacity_);
  }

 private:
  uint8_t* base_ = nullptr;
  uint64_t stack_capacity_;
  uint32_t stacks_;
};

/// SBUF or PSUM: partitions x bytes, allocated on first functional use.
class OnChipMemory {
 public:
  OnChipMemory(uint32_t partitions, uint64_t partition_bytes)
      : partitions_(partitions), partition_bytes_(partition_bytes) {}
  uint8_t* partition(uint32_t p) {
    if (bytes_.empty()) bytes_.assign(partitions_ * partition_bytes_, 0);
    return bytes_.data() + p * partition_bytes_;
  }
  uint32_t partitions() const { return partitions_; }
  uint64_t partition_bytes() const { return partition_bytes_; }

 private:
  uint32_t partitions_;
  uint64_t partition_bytes_;
  std::vector<uint8_t> bytes_;
};

/// What an executor sees: the three memories of one core.
struct MemoryMap {
  OnChipMemory* sbuf;
  OnChipMemory* psum;
  HbmStorage* hbm;

  /// Address of an element given the byte offset for_each_element() reports.
  uint8_t* element(const AccessPattern& ap, uint32_t p, int64_t byte_offset) const {
    switch (ap.space) {
      case MemSpace::kHbm:
        return hbm->data() + byte_offset;
      case MemSpace::kSbuf:
        return sbuf->partition(ap.start_partition + p) + byte_offset;
      case MemSpace::kPsum:
        return psum->partition(ap.start_partition + p) + byte_offset;
    }
    return nullptr;
  }
};

}  // namespace neuronsim::device_model
