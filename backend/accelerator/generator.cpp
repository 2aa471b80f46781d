#include "accelerator/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "accelerator/context.h"
#include "neuronsim/device_model/philox.h"

namespace neuronsim::backend {

NeuronGenerator::NeuronGenerator(c10::DeviceIndex index, bool device_default, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      device_default_(device_default),
      seed_(seed),
      seeded_host_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGenerator::current_seed() const {
  return seed_;
}

uint64_t NeuronGenerator::seed() {
  const uint64_t s = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(s);
  return s;
}

void NeuronGenerator::set_offset(uint64_t offset) {
  offset_ = offset;
}

uint64_t NeuronGenerator::get_offset() const {
  return offset_;
}

void NeuronGenerator::set_state(const c10::TensorImpl& new_state) {
  const auto n = new_state.numel();
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && (n == 16 || n == 8),
              "RNG state is wrong size: a neuron generator's state is 16 bytes (seed, offset) "
              "or 8 bytes (a seed), as a torch.uint8 tensor; got ",
              n, " elements of ", new_state.dtype().name());
  const auto* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  offset_ = 0;
  if (n == 16) std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  std::memcpy(t.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(t.data_ptr<uint8_t>() + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

NeuronGenerator::PhiloxStream NeuronGenerator::philox_stream(uint64_t blocks) {
  if (draws_philox()) {
    const PhiloxStream s{seed_, offset_};
    offset_ += blocks;
    return s;
  }
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(cpu->mutex_);
  return {cpu->random64(), 0};
}

const at::Generator& NeuronGenerator::host() {
  if (!draws_philox()) return at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto b = device_model::philox::block(seed_, offset_++);
  seeded_host_.set_current_seed((uint64_t{b[1]} << 32) | b[0]);
  return seeded_host_;
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* g = new NeuronGenerator(device().index(), device_default_, seed_);
  g->offset_ = offset_;
  g->region_ = region_;
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
    gens.push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(gens.size()),
                                                       /*device_default=*/true));
  }
  return gens.at(index);
}

at::Generator new_generator(c10::DeviceIndex index) {
  if (index < 0) index = current_device();
  check_device_index(index);
  return at::make_generator<NeuronGenerator>(index, /*device_default=*/false);
}

NeuronGenerator* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index) {
  const at::Generator& g = (gen.has_value() && gen->defined()) ? *gen : default_generator(index);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "expected a neuron generator, got one for ", g.device());
  return at::check_generator<NeuronGenerator>(g);
}

}  // namespace neuronsim::backend
