#include "executor_rows.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace neuronsim::device_model::exec {

uint8_t* contiguous_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p) {
  if (!ap.free_contiguous()) return nullptr;
  if (ap.space == MemSpace::kHbm) {
    const int64_t es = static_cast<int64_t>(dtype_size(ap.dtype));
    return mem.element(
        ap, 0,
        static_cast<int64_t>(ap.offset) + static_cast<int64_t>(p) * ap.partition_stride * es);
  }
  return mem.element(ap, p, static_cast<int64_t>(ap.offset));
}

void load_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p, std::vector<float>& out) {
  out.resize(ap.free_elements());
  if (const uint8_t* src = contiguous_row(mem, ap, p)) {
    if (ap.dtype == DType::kFp32) {
      std::memcpy(out.data(), src, out.size() * 4);
      return;
    }
    if (ap.dtype == DType::kBf16) {  // the upper half of an fp32, as bf16_bits_to_float reads it
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
      }
      return;
    }
    const size_t es = dtype_size(ap.dtype);
    for (size_t i = 0; i < out.size(); ++i) out[i] = load_float(src + i * es, ap.dtype);
    return;
  }
  for_each_in_partition(mem, ap, p,
                        [&](const uint8_t* e, uint64_t i) { out[i] = load_float(e, ap.dtype); });
}

void store_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
               const std::vector<float>& in) {
  if (uint8_t* dst = contiguous_row(mem, ap, p)) {
    if (ap.dtype == DType::kFp32) {
      std::memcpy(dst, in.data(), in.size() * 4);
      return;
    }
    const size_t es = dtype_size(ap.dtype);
    for (size_t i = 0; i < in.size(); ++i) store_float(dst + i * es, ap.dtype, in[i]);
    return;
  }
  for_each_in_partition(mem, ap, p,
                        [&](uint8_t* e, uint64_t i) { store_float(e, ap.dtype, in[i]); });
}

void load_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                  std::vector<int64_t>& out) {
  out.resize(ap.free_elements());
  for_each_in_partition(mem, ap, p,
                        [&](const uint8_t* e, uint64_t i) { out[i] = load_int(e, ap.dtype); });
}

void store_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                   const std::vector<int64_t>& in) {
  for_each_in_partition(mem, ap, p, [&](uint8_t* e, uint64_t i) { store_int(e, ap.dtype, in[i]); });
}

float scalar_value(const MemoryMap& mem, const ScalarOperand& s, uint32_t p) {
  if (!s.from_ap) return s.imm;
  float v = 0;
  for_each_in_partition(mem, s.ap, p, [&](const uint8_t* e, uint64_t i) {
    if (i == 0) v = load_float(e, s.ap.dtype);
  });
  return v;
}

int64_t scalar_value_int(const MemoryMap& mem, const ScalarOperand& s, uint32_t p) {
  if (!s.from_ap) return static_cast<int64_t>(s.imm);
  int64_t v = 0;
  for_each_in_partition(mem, s.ap, p, [&](const uint8_t* e, uint64_t i) {
    if (i == 0) v = load_int(e, s.ap.dtype);
  });
  return v;
}

bool imm_is_int32(float v) {
  return std::trunc(v) == v && v >= -2147483648.0f && v < 2147483648.0f;
}

bool scalar_is_int(const ScalarOperand& s) {
  return s.from_ap ? is_integer(s.ap.dtype) : imm_is_int32(s.imm);
}

bool all_int(std::initializer_list<DType> ts) {
  for (DType t : ts) {
    if (!is_integer(t)) return false;
  }
  return true;
}

}  // namespace neuronsim::device_model::exec
