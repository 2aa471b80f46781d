#include "neuronsim/kernels/tensor_desc.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace neuronsim::kernels {

uint64_t TensorDesc::numel() const {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

bool TensorDesc::contiguous() const {
  int64_t expect = 1;
  for (int64_t k = dim() - 1; k >= 0; --k) {
    if (sizes[k] == 1) continue;
    if (strides[k] != expect) return false;
    expect *= sizes[k];
  }
  return true;
}

std::vector<int64_t> broadcast_strides(const TensorDesc& t, const std::vector<int64_t>& sizes) {
  if (t.sizes.size() > sizes.size()) {
    throw std::invalid_argument(fmt::format("{} has more dims than the output", t.to_string()));
  }
  std::vector<int64_t> s(sizes.size(), 0);
  const size_t off = sizes.size() - t.sizes.size();
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] != 1 && t.sizes[d] != sizes[off + d]) {
      throw std::invalid_argument(
          fmt::format("{} does not broadcast to the output", t.to_string()));
    }
    s[off + d] = t.sizes[d] == 1 ? 0 : t.strides[d];
  }
  return s;
}

device_model::AccessPattern hbm_ap(const TensorDesc& t, int64_t offset, uint32_t partitions,
                                   int64_t partition_stride,
                                   std::initializer_list<device_model::Dim> dims) {
  device_model::AccessPattern ap;
  ap.space = device_model::MemSpace::kHbm;
  ap.dtype = t.dtype;
  ap.partitions = partitions;
  ap.partition_stride = partition_stride;
  ap.offset =
      static_cast<uint64_t>(static_cast<int64_t>(t.address) +
                            offset * static_cast<int64_t>(device_model::dtype_size(t.dtype)));
  ap.ndims = static_cast<uint8_t>(dims.size());
  std::copy(dims.begin(), dims.end(), ap.dims.begin());
  return ap;
}

std::string TensorDesc::to_string() const {
  return fmt::format("{}[{}]@{:#x}", device_model::dtype_name(dtype), fmt::join(sizes, ","),
                     address);
}

}  // namespace neuronsim::kernels
