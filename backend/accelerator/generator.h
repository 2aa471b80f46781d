#pragma once
// The neuron device generator: Philox with a 16-byte state (seed, offset), so
// torch.neuron.manual_seed makes native random ops reproducible and DTensor's offset-based RNG
// tracker (state[-16:-8] = seed, state[-8:] = offset) works.
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace neuronsim::backend {

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  explicit NeuronGenerator(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  /// Reserves `blocks` Philox blocks; returns the offset they start at.
  uint64_t reserve(uint64_t blocks) {
    const uint64_t o = offset_;
    offset_ += blocks;
    return o;
  }

 private:
  NeuronGenerator* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
/// The generator to use: the given one or the device default.
NeuronGenerator* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index);

}  // namespace neuronsim::backend
