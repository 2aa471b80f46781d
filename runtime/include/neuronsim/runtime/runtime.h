#pragma once
// The device runtime: what a framework backend talks to (as PyTorch's CUDA backend talks to the
// CUDA runtime). Torch-free. One per process, created on first use from the environment:
//   NEURON_SIM_PRESET (trn1 | trn2 | path), NEURON_SIM_SET ("key=value,key=value"),
//   NEURON_RT_VISIBLE_CORES ("0-1", "2,3"), NEURON_RT_NUM_CORES (first N logical cores),
//   NEURON_LAUNCH_BLOCKING=1 (every launch waits for the device),
//   NEURON_SIM_MODE=isa (kernel programs compute the values; default: host kernels compute
//   them and programs run through the timing model only).
//
// Simulated time has two clocks: the host clock (the framework thread: launch overhead, CPU
// fallbacks, waiting) and the device clock (SystemC). A launch starts on the device at
// max(host clock, device free, stream dependencies); the host continues unless the call blocks.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/collectives/interconnect.h"
#include "neuronsim/device/device.h"
#include "neuronsim/runtime/caching_allocator.h"
#include "neuronsim/runtime/collective_timeline.h"
#include "neuronsim/runtime/program_cache.h"

namespace neuronsim::runtime {

struct RuntimeConfig {
  std::string preset = "trn1";
  std::vector<std::string> overrides;
  /// Logical NeuronCores visible to the framework; empty = every core of the instance.
  std::vector<uint32_t> visible_cores;
  bool launch_blocking = false;
  bool isa_mode = false;
  /// Physical cores per logical core, as NEURON_LOGICAL_NC_CONFIG sets it for the Neuron
  /// runtime (1 or 2); unset: the preset's. Applied before `overrides`.
  std::optional<uint32_t> logical_nc;

  /// Reads the environment variables above; throws device::ConfigError naming a bad value.
  static RuntimeConfig from_environment();
};

/// Parses "0-3", "1,3", "0-1,4" into core ids; throws device::ConfigError.
std::vector<uint32_t> parse_core_list(const std::string& text, const std::string& variable);

struct Event {
  sim::SimTime time;
  bool recorded = false;
};

class Runtime {
 public:
  /// The process's runtime, created from the environment on first use.
  static Runtime& instance();
  static bool initialized();
  /// Sets the configuration used when the runtime is created; throws once it exists.
  static void configure(const RuntimeConfig& config);
  /// The configuration in force (or that will be used on creation).
  static const RuntimeConfig& pending();
  /// Logical devices a configuration makes visible, without creating the runtime (cheap: reads
  /// the preset only). Throws device::ConfigError like the runtime would.
  static uint32_t visible_device_count(const RuntimeConfig& config);

  device::Device& device() { return *device_; }
  const RuntimeConfig& config() const { return config_; }
  /// ISA mode: kernel programs compute the values (see RuntimeConfig::isa_mode).
  bool isa_mode() const { return config_.isa_mode; }
  void set_isa_mode(bool on) {
    config_.isa_mode = on;
    program_cache_.clear();
  }
  uint32_t device_count() const { return static_cast<uint32_t>(physical_.size()); }
  /// Physical core that runs a logical device's kernels.
  uint32_t physical_core(uint32_t dev) const;
  std::string device_name(uint32_t dev) const;

  // ---- memory ----
  /// Host pointer into simulated HBM; throws device::OutOfMemoryError.
  void* malloc(uint32_t dev, uint64_t bytes);
  void free(void* ptr);
  CachingAllocator& allocator(uint32_t dev);
  HbmAllocator& segments(uint32_t dev);
  /// The logical device whose HBM holds `ptr`, or -1.
  int device_of(const void* ptr) const;
  uint64_t hbm_address(const void* ptr) const;
  /// Is [ptr, ptr + bytes) inside live device memory?
  bool valid_range(uint64_t hbm_address, uint64_t bytes) const;

  // ---- time ----
  sim::SimTime host_time() const { return host_time_; }
  sim::SimTime device_time() const { return device_->now(); }
  /// Host-side cost (launch overhead, CPU work): moves the host clock.
  void host_advance(sim::SimTime delta) { host_time_ = host_time_ + delta; }
  /// Waits (host clock) for all work on the device.
  void synchronize();

  /// Runs a kernel on a logical device's stream; returns its device-time span. In the default
  /// mode the program runs timing-only (the caller computed the values); `functional` forces
  /// full execution (ISA mode).
  /// `validated`: the program came from the program cache (validated when first launched).
  device::RunResult launch(uint32_t dev, int64_t stream, const device::Program& program,
                           bool functional, bool validated = false);
  /// Programs built before, for this configuration (program_cache.h).
  ProgramCache& program_cache() { return program_cache_; }
  /// A host<->device copy (blocking for the host unless `non_blocking`).
  device::Device::HostCopy copy_host(uint32_t dev, int64_t stream, uint64_t bytes, bool to_device,
                                     uint64_t hbm_address, bool non_blocking);

  // ---- streams and events ----
  int64_t new_stream(uint32_t dev);
  void record(Event& e, uint32_t dev, int64_t stream);
  void wait_event(const Event& e, uint32_t dev, int64_t stream);
  bool query(const Event& e) const { return !e.recorded || host_time_ >= e.time; }
  void synchronize_event(const Event& e);
  bool query_stream(uint32_t dev, int64_t stream) const;
  void synchronize_stream(uint32_t dev, int64_t stream);

  /// Launches so far.
  uint64_t launches() const { return launches_; }

  // ---- collectives (a distributed job's rank) ----
  /// When a collective issued now on `stream` reaches the device: after the stream's work and
  /// dependencies, and not before the host issues it.
  sim::SimTime arrival(uint32_t dev, int64_t stream);
  CollectiveTimeline& collectives() { return collectives_; }
  /// The instance's interconnect, from the configuration in force (read on first use: a preset
  /// without collective parameters still runs single-core work). Throws device::ConfigError.
  const collectives::InterconnectParams& interconnect();

 private:
  explicit Runtime(const RuntimeConfig& config);
  struct StreamState {
    sim::SimTime ready;  // when the stream's last work completes
    sim::SimTime wait;   // the stream may not start new work before this
  };
  StreamState& stream_state(uint32_t dev, int64_t stream);
  sim::SimTime start_time(uint32_t dev, int64_t stream);
  void check_dev(uint32_t dev) const;

  RuntimeConfig config_;
  std::unique_ptr<device::Device> device_;
  std::vector<uint32_t> physical_;  // logical device -> physical core
  std::vector<std::unique_ptr<HbmAllocator>> segments_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
  std::vector<std::vector<StreamState>> streams_;
  sim::SimTime host_time_;
  uint64_t launches_ = 0;
  CollectiveTimeline collectives_;
  std::optional<collectives::InterconnectParams> interconnect_;
  ProgramCache program_cache_;
};

}  // namespace neuronsim::runtime
