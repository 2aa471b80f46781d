#include "graph/host_run.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>

#include "aten/device_tensor.h"

namespace neuronsim::backend {

at::Tensor HostRun::alias(const Entry& e, const at::Tensor& t) const {
  at::Tensor out = at::empty({0}, t.options().device(e.device.device()));
  out.set_(e.device, t.storage_offset(), t.sizes(), t.strides());
  return out;
}

at::Tensor HostRun::view(const at::Tensor& t) {
  TORCH_CHECK(!t.is_conj() && !t.is_neg(), "neuronsim: a compiled graph's host run got ",
              "a tensor with a lazy conjugate/negative bit");
  if (!device_) device_ = t.device();
  const c10::Storage& s = t.storage();
  void* base = s.mutable_data();
  auto it = by_base_.find(base);
  if (it == by_base_.end() || base == nullptr) {
    c10::Storage cpu(c10::Storage::use_byte_size_t(), s.nbytes(),
                     c10::DataPtr(base, c10::Device(c10::kCPU)), nullptr, false);
    Entry e{s, cpu};
    if (base == nullptr) {
      at::Tensor v = at::empty({0}, t.options().device(c10::kCPU));
      return v.set_(cpu, t.storage_offset(), t.sizes(), t.strides());
    }
    it = by_base_.emplace(base, std::move(e)).first;
  }
  at::Tensor v = at::empty({0}, t.options().device(c10::kCPU));
  v.set_(it->second.cpu, t.storage_offset(), t.sizes(), t.strides());
  return v;
}

at::Tensor HostRun::to_device(const at::Tensor& t, c10::Device device) {
  if (t.device() == device) return t;
  const c10::Storage& s = t.storage();
  const void* base = s.data();
  if (base == nullptr || s.nbytes() == 0) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
  }
  auto it = by_base_.find(base);
  if (it == by_base_.end()) {
    at::Tensor bytes = at::empty({static_cast<int64_t>(s.nbytes())},
                                 at::TensorOptions().dtype(at::kByte).device(device));
    std::memcpy(bytes.data_ptr(), base, s.nbytes());
    it = by_base_.emplace(base, Entry{bytes.storage(), s}).first;
  }
  return alias(it->second, t);
}

at::Tensor HostRun::program_value(const at::Tensor& t, c10::Device device) {
  if (t.device() == device) return t;
  const void* base = t.storage().data();
  auto it = by_base_.find(base);
  if (base != nullptr && it != by_base_.end()) return alias(it->second, t);
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
}

}  // namespace neuronsim::backend
