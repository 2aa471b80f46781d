#pragma once
// A framework tensor as the kernel library sees it: an HBM address, a device dtype, and sizes and
// strides in elements. 64-bit framework types are described as their low 32-bit words (strides
// doubled), which is how the device computes them.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/device_model/dtype.h"

namespace neuronsim::kernels {

struct TensorDesc {
  uint64_t address = 0;
  device_model::DType dtype = device_model::DType::kFp32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;

  uint64_t numel() const;
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  bool contiguous() const;
  std::string to_string() const;
};

/// The strides of `t` broadcast (right-aligned) onto `sizes`: stride 0 on broadcast dims.
/// Throws std::invalid_argument when `t` does not broadcast.
std::vector<int64_t> broadcast_strides(const TensorDesc& t, const std::vector<int64_t>& sizes);

/// An HBM access pattern over `t`'s memory: `partitions` rows `partition_stride` elements apart,
/// the first at element `offset`, each row walking the free dims `dims` (element strides).
device_model::AccessPattern hbm_ap(const TensorDesc& t, int64_t offset, uint32_t partitions,
                                   int64_t partition_stride,
                                   std::initializer_list<device_model::Dim> dims);

}  // namespace neuronsim::kernels
