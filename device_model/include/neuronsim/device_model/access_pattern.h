#pragma once
// An access pattern (AP) names a tensor in one memory: a partition dimension plus up to four free
// dimensions with element strides, the same pattern in every partition (ARCH-v2).
//
// SBUF/PSUM: element (p, i0..i3) lives in partition start_partition + p at byte
//   offset + sum(i_k * stride_k) * dtype_size.
// HBM: memory is linear; the partition dimension is just the outermost dimension, so element
//   (p, i...) lives at byte offset + (p * partition_stride + sum(i_k * stride_k)) * dtype_size.
#include <array>
#include <cstdint>
#include <string>

#include "neuronsim/device_model/dtype.h"

namespace neuronsim::device_model {

enum class MemSpace : uint8_t { kHbm, kSbuf, kPsum };

std::string_view mem_space_name(MemSpace s);

struct Dim {
  int64_t stride = 1;  // elements
  uint32_t size = 1;
  bool operator==(const Dim&) const = default;
};

inline constexpr int kMaxFreeDims = 4;

struct AccessPattern {
  MemSpace space = MemSpace::kSbuf;
  DType dtype = DType::kFp32;
  uint32_t start_partition = 0;  // SBUF/PSUM only
  uint32_t partitions = 1;
  int64_t partition_stride = 0;  // HBM only, elements
  uint64_t offset = 0;           // bytes: within a partition (SBUF/PSUM), absolute (HBM)
  uint8_t ndims = 0;
  std::array<Dim, kMaxFreeDims> dims{};

  bool operator==(const AccessPattern&) const = default;

  /// Elements per partition (product of free sizes; 1 with no free dims).
  uint64_t free_elements() const {
    uint64_t n = 1;
    for (int k = 0; k < used_dims(); ++k) n *= dims[k].size;
    return n;
  }
  uint64_t elements() const { return free_elements() * partitions; }
  uint64_t bytes() const { return elements() * dtype_size(dtype); }
  /// Stride of the innermost free dim in bytes (0 with no free dims).
  uint64_t inner_stride_bytes() const;
  /// True when the free dims walk memory contiguously in order.
  bool free_contiguous() const;
  /// Lowest and one-past-highest byte touched within a partition (SBUF/PSUM) or in HBM.
  /// Strides may be negative; the span covers every element.
  struct Span {
    int64_t lo, hi;
  };
  Span byte_span() const {
    // The common case in 64 bits; any product or sum that could overflow takes the 128-bit
    // path, which gives the same answer whenever this one does not overflow.
    int64_t lo = 0, hi = 0;  // element offsets relative to `offset`
    bool ok = offset <= static_cast<uint64_t>(INT64_MAX);
    auto extend = [&](int64_t stride, uint32_t size) {
      if (size == 0) return;
      int64_t reach;
      ok = ok && !__builtin_mul_overflow(stride, static_cast<int64_t>(size) - 1, &reach);
      ok = ok && !__builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
    };
    for (int k = 0; k < used_dims(); ++k) extend(dims[k].stride, dims[k].size);
    if (space == MemSpace::kHbm) extend(partition_stride, partitions);
    const int64_t es = static_cast<int64_t>(dtype_size(dtype));
    int64_t lo_b, hi_b, a, b;
    ok = ok && !__builtin_mul_overflow(lo, es, &lo_b) && !__builtin_add_overflow(hi, 1, &hi_b) &&
         !__builtin_mul_overflow(hi_b, es, &hi_b) &&
         !__builtin_add_overflow(static_cast<int64_t>(offset), lo_b, &a) &&
         !__builtin_add_overflow(static_cast<int64_t>(offset), hi_b, &b);
    return ok ? Span{a, b} : byte_span_wide();
  }
  /// Human-readable form used in traces and errors: "bf16@sbuf[0:128]+64[[1,512]]".
  std::string to_string() const;
  /// Appends to_string()'s text.
  void append_to(std::string& out) const;
  /// The same, as a trace record's deferred string (sim::TraceArgs::add_deferred).
  static void append_text(const AccessPattern& ap, std::string& out) { ap.append_to(out); }

 private:
  // Never more than kMaxFreeDims, even for an AP the validator has not seen (e.g. an unused
  // operand field): the methods must not read past `dims`.
  int used_dims() const { return ndims < kMaxFreeDims ? ndims : kMaxFreeDims; }
  /// byte_span() in 128 bits, saturated to int64.
  Span byte_span_wide() const;
};

/// Calls fn(byte_address_within_space, partition_index, element_index_in_partition) for every
/// element in row-major order. For SBUF/PSUM the address is relative to the partition's base.
template <typename Fn>
void for_each_element(const AccessPattern& ap, Fn&& fn) {
  const int64_t es = static_cast<int64_t>(dtype_size(ap.dtype));
  std::array<Dim, kMaxFreeDims> d{};
  const int n = ap.ndims;
  for (int k = 0; k < kMaxFreeDims; ++k) d[k] = k < n ? ap.dims[k] : Dim{0, 1};
  for (uint32_t p = 0; p < ap.partitions; ++p) {
    int64_t base = static_cast<int64_t>(ap.offset);
    if (ap.space == MemSpace::kHbm) base += static_cast<int64_t>(p) * ap.partition_stride * es;
    uint64_t idx = 0;
    for (uint32_t a = 0; a < d[0].size; ++a) {
      for (uint32_t b = 0; b < d[1].size; ++b) {
        for (uint32_t c = 0; c < d[2].size; ++c) {
          int64_t addr = base + (a * d[0].stride + b * d[1].stride + c * d[2].stride) * es;
          for (uint32_t e = 0; e < d[3].size; ++e) {
            fn(addr + e * d[3].stride * es, p, idx++);
          }
        }
      }
    }
  }
}

}  // namespace neuronsim::device_model
