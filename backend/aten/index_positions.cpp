#include "aten/index_positions.h"

#include <ATen/ATen.h>

#include "aten/device_tensor.h"

namespace neuronsim::backend {

at::Tensor positions(const at::Tensor& t) {
  return at::arange(t.numel(), at::TensorOptions().dtype(at::kLong)).view(t.sizes());
}

std::vector<int64_t> to_vec(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor on_cpu(const at::Tensor& t) {
  return t.device().is_privateuseone() ? cpu_view(t) : t;
}

}  // namespace neuronsim::backend
