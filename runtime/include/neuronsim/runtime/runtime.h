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

#include "neuronsim/device_model/device.h"
#include "neuronsim/device_model/interconnect/interconnect.h"
#include "neuronsim/runtime/caching_allocator.h"
#include "neuronsim/runtime/collective_timeline.h"
#include "neuronsim/runtime/program_cache.h"
#include "neuronsim/traces/time_account.h"

namespace neuronsim::runtime {

class RunLog;

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

  /// Reads the environment variables above; throws device_model::ConfigError naming a bad value.
  static RuntimeConfig from_environment();
};

/// Parses "0-3", "1,3", "0-1,4" into core ids; throws device_model::ConfigError.
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
  /// the preset only). Throws device_model::ConfigError like the runtime would.
  static uint32_t visible_device_count(const RuntimeConfig& config);

  device_model::Device& device() { return *device_; }
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
  /// Host pointer into simulated HBM; throws device_model::OutOfMemoryError.
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
  /// Host-side cost: moves the host clock. Work the run's account should name goes through
  /// the charges below.
  void host_advance(sim::SimTime delta);
  /// Charges the host for launching a kernel or issuing a collective
  /// (host.kernel_launch_overhead_ns); returns the host time the charge began.
  sim::SimTime charge_launch_overhead();
  /// Charges the host for running an op's CPU kernel (host.cpu_fallback_overhead_ns); returns
  /// the host time the charge began.
  sim::SimTime charge_cpu_fallback();
  /// Where the time went since the runtime started, up to max(host clock, device clock, the
  /// last collective's end): kernels, copies, collectives, CPU fallbacks, launch overhead
  /// (traces/time_account.h).
  traces::TimeAccount time_account() const;
  /// Busy time of each engine of the cores that ran, by label ("nc0 TensorE", and "nc0 DMA (all
  /// queues)" for its DMA queues together), from the device's statistics.
  std::vector<std::pair<std::string, sim::SimTime>> engine_busy() const;
  /// The account, the engines' busy time and what limits the run, as the summary documents give
  /// them: {"time_account", "engine_busy_ns": [[label, ns], ...], "limit"}.
  nlohmann::json time_report() const;
  /// Waits (host clock) for all work on the device.
  void synchronize();

  /// Runs a kernel on a logical device's stream; returns its device-time span. In the default
  /// mode the program runs timing-only (the caller computed the values); `functional` forces
  /// full execution (ISA mode).
  /// `validated`: the program came from the program cache (validated when first launched).
  device_model::RunResult launch(uint32_t dev, int64_t stream, const device_model::Program& program,
                                 bool functional, bool validated = false);
  /// Programs built before, for this configuration (program_cache.h).
  ProgramCache& program_cache() { return program_cache_; }
  /// A host<->device copy (blocking for the host unless `non_blocking`).
  device_model::Device::HostCopy copy_host(uint32_t dev, int64_t stream, uint64_t bytes,
                                           bool to_device, uint64_t hbm_address, bool non_blocking);

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

  /// Keeps every call that moves the clocks in `log` from now on (null: stop), so the run can
  /// be re-timed under another preset (run_log.h). The log must outlive the recording.
  void set_run_log(RunLog* log) { log_ = log; }
  RunLog* run_log() const { return log_; }

  // ---- collectives (a distributed job's rank) ----
  /// When a collective issued now on `stream` reaches the device: after the stream's work and
  /// dependencies, and not before the host issues it.
  sim::SimTime arrival(uint32_t dev, int64_t stream);
  CollectiveTimeline& collectives() { return collectives_; }
  /// The instance's interconnect, from the configuration in force (read on first use: a preset
  /// without collective parameters still runs single-core work). Throws device_model::ConfigError.
  const device_model::interconnect::InterconnectParams& interconnect();

 private:
  explicit Runtime(const RuntimeConfig& config);
  struct StreamState {
    sim::SimTime ready;  // when the stream's last work completes
    sim::SimTime wait;   // the stream may not start new work before this
  };
  StreamState& stream_state(uint32_t dev, int64_t stream);
  sim::SimTime charge(traces::TimePart part, double ns);
  sim::SimTime start_time(uint32_t dev, int64_t stream);
  // When work issued now on `stream` could start: after its work and dependencies, not before
  // the host issues it.
  sim::SimTime stream_done(uint32_t dev, int64_t stream);
  void check_dev(uint32_t dev) const;

  RuntimeConfig config_;
  std::unique_ptr<device_model::Device> device_;
  std::vector<uint32_t> physical_;  // logical device -> physical core
  std::vector<std::unique_ptr<HbmAllocator>> segments_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
  std::vector<std::vector<StreamState>> streams_;
  sim::SimTime host_time_;
  uint64_t launches_ = 0;
  CollectiveTimeline collectives_;
  std::optional<device_model::interconnect::InterconnectParams> interconnect_;
  ProgramCache program_cache_;
  traces::TimeAccumulator account_;
  RunLog* log_ = nullptr;
};

}  // namespace neuronsim::runtime
