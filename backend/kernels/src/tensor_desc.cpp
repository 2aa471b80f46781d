#include "neuronsim/kernels/tensor_desc.h"

#include <fmt/format.h>

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

std::string TensorDesc::to_string() const {
  return fmt::format("{}[{}]@{:#x}", device::dtype_name(dtype), fmt::join(sizes, ","), address);
}

}  // namespace neuronsim::kernels
