#pragma once
// The neuron device generator, as TorchNeuron's: its stream is the CPU's. It holds a CPU
// generator (mt19937, at::CPUGeneratorImpl) that random ops hand to ATen's CPU kernels, so after
// torch.manual_seed(s) a random op on neuron draws exactly what the same op draws on the CPU, and
// get_state/set_state are the CPU generator's state (5056 bytes).
//
// Two counter-based Philox streams (device_model/philox.h, the ISA rng instruction's) complement it
// where the CPU stream cannot serve:
// - ISA mode, where the rng instruction computes the values: each op's Philox seed is drawn from
//   the CPU stream (reproducible under manual_seed and state restores, not the CPU's values);
// - DTensor's offset regions (python/neuronsim/_dtensor_rng.py): the tracker picks (seed,
//   offset) so that the shards of one DTensor draw disjoint parts of one stream, which mt19937
//   cannot skip to. get_offset/set_offset are the tracker's offset between regions.
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <optional>

namespace neuronsim::backend {

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  explicit NeuronGenerator(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  /// The CPU generator random ops' CPU kernels draw from (it has its own mutex).
  const at::Generator& host() const { return host_; }

  struct PhiloxStream {
    uint64_t seed = 0, offset = 0;
  };
  /// The Philox stream of an op drawing `blocks` Philox blocks: inside an offset region the
  /// region's (seed, offset), which then advances; otherwise a seed drawn from the CPU stream,
  /// offset 0. Call with mutex_ held.
  PhiloxStream philox_stream(uint64_t blocks);
  /// Random ops draw Philox streams (not the CPU stream) while a region is open.
  bool in_offset_region() const { return region_.has_value(); }

 private:
  NeuronGenerator* clone_impl() const override;
  at::Generator host_;
  uint64_t offset_ = 0;
  std::optional<PhiloxStream> region_;
};

const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
/// The generator to use: the given one or the device default.
NeuronGenerator* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index);

}  // namespace neuronsim::backend
