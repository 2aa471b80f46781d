#pragma once
// The neuron device generator, as TorchNeuron's behaves. TorchNeuron's random ops run on the CPU
// and copy the result, so a device's draws come from the CPU default generator: CPU and neuron
// draws interleave in one stream, and after torch.manual_seed(s) a program draws on neuron what
// it draws on the CPU. The device generator itself only holds TorchNeuron's 16-byte Philox state
// (seed, offset): get_rng_state/set_rng_state/manual_seed on neuron read and write it and leave
// the CPU stream alone.
//
// The (seed, offset) state is drawn from (device_model/philox.h, the ISA rng instruction's
// counter-based stream) where the CPU stream cannot serve:
// - a generator the user creates (torch.Generator(device="neuron")): its draws are its own
//   Philox stream, reproducible from its state (TorchNeuron's CPU kernels would reject it);
// - DTensor's offset regions (python/neuronsim/_dtensor_rng.py): the tracker sets (seed,
//   offset) so that the shards of one DTensor draw disjoint parts of one stream, which mt19937
//   cannot skip to; random ops inside a region draw it, advancing the offset;
// - ISA mode, where the rng instruction computes the values: each op's Philox seed is drawn
//   from the CPU stream (reproducible under torch.manual_seed, not the CPU's values).
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace neuronsim::backend {

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  /// `device_default`: a device's default generator (draws the CPU stream); otherwise one the
  /// user created (draws its own Philox stream).
  NeuronGenerator(c10::DeviceIndex index, bool device_default,
                  uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  /// TorchNeuron's state: 16 bytes, (seed, offset) as little-endian 64-bit integers; 8 bytes
  /// (a seed, offset 0) are accepted as TorchNeuron accepts them.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  /// Random ops draw this generator's Philox stream (a user's generator, or inside a DTensor
  /// region), not the CPU stream.
  bool draws_philox() const { return !device_default_ || region_; }
  /// DTensor's offset region on a device's default generator (_dtensor_rng.py).
  void set_region(bool open) { region_ = open; }

  struct PhiloxStream {
    uint64_t seed = 0, offset = 0;
  };
  /// The Philox stream of an op drawing `blocks` Philox blocks: this generator's (seed,
  /// offset), which then advances, when draws_philox(); otherwise a seed drawn from the CPU
  /// stream, offset 0 (ISA mode). Call with mutex_ held.
  PhiloxStream philox_stream(uint64_t blocks);

  /// The CPU generator a CPU kernel draws with for this generator: the CPU default generator
  /// (the CPU stream), or, when draws_philox(), a CPU generator seeded from the next block of
  /// the Philox stream (reproducible from the state). Takes mutex_.
  const at::Generator& host();

 private:
  NeuronGenerator* clone_impl() const override;
  bool device_default_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  bool region_ = false;
  at::Generator seeded_host_;  // host() when draws_philox()
};

const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
/// The generator to use: the given one or the device default.
NeuronGenerator* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index);

}  // namespace neuronsim::backend
