#pragma once
// Index-dependent kernels resolve element positions on the host with ATen, as the runtime's
// descriptor generation would: positions are logical row-major element indices.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace neuronsim::backend {

/// The position of every element of `t`, as a CPU int64 tensor with t's shape.
at::Tensor positions(const at::Tensor& t);
/// An integer tensor's values, in row-major order.
std::vector<int64_t> to_vec(const at::Tensor& t);
/// A device tensor as a zero-copy CPU view (CPU tensors as they are).
at::Tensor on_cpu(const at::Tensor& t);

}  // namespace neuronsim::backend
