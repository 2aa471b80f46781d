#pragma once
// Row I/O of the executor: an access pattern's partition p as a row of fp32 values (or int64 for
// the exact integer path), read and written through the dtype conversions of dtype.h, and the
// value of a scalar operand for a partition. Every opcode is a few lines over these rows.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/memory.h"

namespace neuronsim::device_model::exec {

// Visits the free elements of partition p of an AP: fn(pointer, index).
template <typename Fn>
void for_each_in_partition(const MemoryMap& mem, const AccessPattern& ap, uint32_t p, Fn&& fn) {
  AccessPattern one = ap;
  one.partitions = 1;
  if (ap.space == MemSpace::kHbm) {
    one.offset = static_cast<uint64_t>(static_cast<int64_t>(ap.offset) +
                                       static_cast<int64_t>(p) * ap.partition_stride *
                                           static_cast<int64_t>(dtype_size(ap.dtype)));
  }
  const uint32_t phys = ap.space == MemSpace::kHbm ? 0 : p;
  for_each_element(
      one, [&](int64_t addr, uint32_t, uint64_t idx) { fn(mem.element(ap, phys, addr), idx); });
}

/// The first free element of partition p when the free elements are contiguous (element i at
/// + i * dtype_size, the order for_each_in_partition visits them), else null: row loops over
/// such a pattern need no per-element address arithmetic.
uint8_t* contiguous_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p);

void load_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p, std::vector<float>& out);
void store_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
               const std::vector<float>& in);
void load_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                  std::vector<int64_t>& out);
void store_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                   const std::vector<int64_t>& in);

/// A scalar operand's value for partition p.
float scalar_value(const MemoryMap& mem, const ScalarOperand& s, uint32_t p);
int64_t scalar_value_int(const MemoryMap& mem, const ScalarOperand& s, uint32_t p);

/// An immediate joins exact integer math only as an int32 value; fractions, inf, NaN and values
/// beyond int32 take the fp32 path (casting them to an integer would be undefined or wrong).
bool imm_is_int32(float v);
bool scalar_is_int(const ScalarOperand& s);
/// All of these dtypes are integers (the exact int64 path applies).
bool all_int(std::initializer_list<DType> ts);

}  // namespace neuronsim::device_model::exec
