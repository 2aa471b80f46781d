#include "accelerator/generator.h"

#include <ATen/Functions.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "accelerator/context.h"

namespace neuronsim::backend {

NeuronGenerator::NeuronGenerator(c10::DeviceIndex index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGenerator::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom(true));
  return seed_;
}

void NeuronGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == 16,
              "neuron generator state must be a ByteTensor of 16 bytes (seed, offset); got ",
              new_state.numel(), " elements of ", new_state.dtype().name());
  const auto* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  auto* p = t.data_ptr<uint8_t>();
  std::memcpy(p, &seed_, 8);
  std::memcpy(p + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* g = new NeuronGenerator(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex m;
  static std::deque<at::Generator> gens;
  if (index < 0) index = current_device();
  check_device_index(index);
  std::lock_guard<std::mutex> lock(m);
  const auto n = std::max<c10::DeviceIndex>(device_count_noexcept(), index + 1);
  while (static_cast<c10::DeviceIndex>(gens.size()) < n) {
    gens.push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(gens.size())));
  }
  return gens.at(index);
}

at::Generator new_generator(c10::DeviceIndex index) {
  if (index < 0) index = current_device();
  check_device_index(index);
  return at::make_generator<NeuronGenerator>(index);
}

NeuronGenerator* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index) {
  const at::Generator& g = (gen.has_value() && gen->defined()) ? *gen : default_generator(index);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "expected a neuron generator, got one for ", g.device());
  return at::check_generator<NeuronGenerator>(g);
}

}  // namespace neuronsim::backend
