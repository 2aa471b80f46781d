#include "neuronsim/device/access_pattern.h"

#include <fmt/format.h>

namespace neuronsim::device {

std::string_view mem_space_name(MemSpace s) {
  switch (s) {
    case MemSpace::kHbm: return "hbm";
    case MemSpace::kSbuf: return "sbuf";
    case MemSpace::kPsum: return "psum";
  }
  return "?";
}

uint64_t AccessPattern::free_elements() const {
  uint64_t n = 1;
  for (int k = 0; k < ndims; ++k) n *= dims[k].size;
  return n;
}

uint64_t AccessPattern::inner_stride_bytes() const {
  if (ndims == 0) return 0;
  int64_t s = dims[ndims - 1].stride;
  return static_cast<uint64_t>(s < 0 ? -s : s) * dtype_size(dtype);
}

bool AccessPattern::free_contiguous() const {
  int64_t expect = 1;
  for (int k = ndims - 1; k >= 0; --k) {
    if (dims[k].size == 1) continue;
    if (dims[k].stride != expect) return false;
    expect *= dims[k].size;
  }
  return true;
}

AccessPattern::Span AccessPattern::byte_span() const {
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  int64_t lo = 0, hi = 0;  // element offsets relative to `offset`
  auto extend = [&](int64_t stride, uint32_t size) {
    if (size == 0) return;
    int64_t reach = stride * (static_cast<int64_t>(size) - 1);
    if (reach < 0) lo += reach;
    else hi += reach;
  };
  for (int k = 0; k < ndims; ++k) extend(dims[k].stride, dims[k].size);
  if (space == MemSpace::kHbm) extend(partition_stride, partitions);
  const int64_t base = static_cast<int64_t>(offset);
  return {base + lo * es, base + (hi + 1) * es};
}

std::string AccessPattern::to_string() const {
  std::string dims_s;
  for (int k = 0; k < ndims; ++k) {
    dims_s += fmt::format("{}[{},{}]", k ? "," : "", dims[k].stride, dims[k].size);
  }
  if (space == MemSpace::kHbm) {
    return fmt::format("{}@hbm+{:#x}[[{},{}]{}{}]", dtype_name(dtype), offset, partition_stride,
                       partitions, ndims ? "," : "", dims_s);
  }
  return fmt::format("{}@{}[{}:{}]+{}[{}]", dtype_name(dtype), mem_space_name(space),
                     start_partition, start_partition + partitions, offset, dims_s);
}

}  // namespace neuronsim::device
