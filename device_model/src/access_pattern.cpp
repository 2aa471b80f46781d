#include "neuronsim/device_model/access_pattern.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace neuronsim::device_model {

std::string_view mem_space_name(MemSpace s) {
  switch (s) {
    case MemSpace::kHbm:
      return "hbm";
    case MemSpace::kSbuf:
      return "sbuf";
    case MemSpace::kPsum:
      return "psum";
  }
  return "?";
}

uint64_t AccessPattern::inner_stride_bytes() const {
  const int n = used_dims();
  if (n == 0) return 0;
  const int64_t s = dims[n - 1].stride;
  // Negate in unsigned arithmetic: -INT64_MIN overflows.
  const uint64_t mag = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
  return mag * dtype_size(dtype);
}

bool AccessPattern::free_contiguous() const {
  __int128 expect = 1;  // a product of four 32-bit sizes does not fit int64
  for (int k = used_dims() - 1; k >= 0; --k) {
    if (dims[k].size == 1) continue;
    if (dims[k].stride != expect) return false;
    expect *= dims[k].size;
  }
  return true;
}

AccessPattern::Span AccessPattern::byte_span_wide() const {
  // Computed in 128 bits (strides up to 2^63 times sizes up to 2^32, five times, fit easily) and
  // saturated to int64, so a pattern reaching beyond the int64 range reports a span that no
  // memory bound accepts instead of overflowing.
  using I128 = __int128;
  const I128 es = static_cast<I128>(dtype_size(dtype));
  I128 lo = 0, hi = 0;  // element offsets relative to `offset`
  auto extend = [&](int64_t stride, uint32_t size) {
    if (size == 0) return;
    const I128 reach = static_cast<I128>(stride) * (static_cast<I128>(size) - 1);
    if (reach < 0)
      lo += reach;
    else
      hi += reach;
  };
  for (int k = 0; k < used_dims(); ++k) extend(dims[k].stride, dims[k].size);
  if (space == MemSpace::kHbm) extend(partition_stride, partitions);
  const I128 base = static_cast<I128>(offset);
  auto sat = [](I128 v) {
    constexpr I128 kMin = std::numeric_limits<int64_t>::min();
    constexpr I128 kMax = std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(v < kMin ? kMin : (v > kMax ? kMax : v));
  };
  return {sat(base + lo * es), sat(base + (hi + 1) * es)};
}

std::string AccessPattern::to_string() const {
  std::string s;
  append_to(s);
  return s;
}

void AccessPattern::append_to(std::string& out) const {
  auto it = std::back_inserter(out);
  auto append_dims = [&] {
    for (int k = 0; k < used_dims(); ++k) {
      fmt::format_to(it, FMT_COMPILE("{}[{},{}]"), k ? "," : "", dims[k].stride, dims[k].size);
    }
  };
  if (space == MemSpace::kHbm) {
    fmt::format_to(it, FMT_COMPILE("{}@hbm+{:#x}[[{},{}]{}"), dtype_name(dtype), offset,
                   partition_stride, partitions, ndims ? "," : "");
    append_dims();
    out += ']';
    return;
  }
  fmt::format_to(it, FMT_COMPILE("{}@{}[{}:{}]+{}["), dtype_name(dtype), mem_space_name(space),
                 start_partition, start_partition + partitions, offset);
  append_dims();
  out += ']';
}

}  // namespace neuronsim::device_model
