#include "accelerator/generator.h"

#include <ATen/CPUGeneratorImpl.h>
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
      host_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(host_.unsafeGetGeneratorImpl()->mutex_);
  host_.set_current_seed(seed);
  offset_ = 0;
}

uint64_t NeuronGenerator::current_seed() const {
  return host_.current_seed();
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
  // 16 bytes (seed, offset): a Philox offset region, as DTensor's RNG tracker sets it
  // (python/neuronsim/_dtensor_rng.py). Anything else is the CPU generator's state, whose own
  // check names the expected size; it ends a region (fork_rng restoring the saved state).
  if (new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == 16) {
    const auto* p = static_cast<const uint8_t*>(new_state.data());
    PhiloxStream st;
    std::memcpy(&st.seed, p, 8);
    std::memcpy(&st.offset, p + 8, 8);
    region_ = st;
    return;
  }
  std::lock_guard<std::mutex> lock(host_.unsafeGetGeneratorImpl()->mutex_);
  host_.unsafeGetGeneratorImpl()->set_state(new_state);
  region_.reset();
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  if (region_) {
    auto t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
    std::memcpy(t.data_ptr<uint8_t>(), &region_->seed, 8);
    std::memcpy(t.data_ptr<uint8_t>() + 8, &region_->offset, 8);
    return t.getIntrusivePtr();
  }
  std::lock_guard<std::mutex> lock(host_.unsafeGetGeneratorImpl()->mutex_);
  return host_.unsafeGetGeneratorImpl()->get_state();
}

NeuronGenerator::PhiloxStream NeuronGenerator::philox_stream(uint64_t blocks) {
  if (region_) {
    const PhiloxStream s = *region_;
    region_->offset += blocks;
    return s;
  }
  std::lock_guard<std::mutex> lock(host_.unsafeGetGeneratorImpl()->mutex_);
  return {at::check_generator<at::CPUGeneratorImpl>(host_)->random64(), 0};
}

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* g = new NeuronGenerator(device().index());
  g->host_ = host_.clone();
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
