#pragma once
// The simulated device: NeuronCores sharing HBM stacks and DMA fabric, elaborated once per
// process from a Config. Programs are submitted per core and run until the device is idle; the
// simulated clock is one monotonic clock for the whole process.
//
// SystemC allows one elaboration per process: construct one Device per process (a different
// preset means a different process).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "neuronsim/device/config.h"
#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/sim/stats.h"
#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device {

/// What a run computes: data only, time only, or both.
enum class ExecMode { kFull, kTiming, kFunctional };
std::string_view exec_mode_name(ExecMode m);
std::optional<ExecMode> parse_exec_mode(std::string_view name);

struct DeviceOptions {
  /// NeuronCores to elaborate; 0 = every core of the configured instance's first chip.
  uint32_t cores = 0;
  ExecMode mode = ExecMode::kFull;
};

/// Timing of one core's part of a run.
struct CoreRunResult {
  uint32_t core = 0;
  std::string program;
  sim::SimTime start, end;
  uint64_t instructions = 0;
};

struct RunResult {
  sim::SimTime start, end;
  std::vector<CoreRunResult> cores;
  sim::SimTime duration() const { return end - start; }
};

class Device {
 public:
  explicit Device(const Config& config, DeviceOptions options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const ChipParams& params() const;
  const Config& config() const;
  uint32_t num_cores() const;
  ExecMode mode() const;
  void set_mode(ExecMode mode);

  /// Attaches a trace sink (not owned); null detaches. Also records the config as metadata.
  void set_trace_sink(sim::TraceSink* sink);
  sim::TraceSink& trace_sink();
  sim::StatsRegistry& stats();

  /// Host-addressable HBM of all elaborated stacks.
  uint8_t* hbm_data();
  uint64_t hbm_capacity() const;
  /// First HBM byte of the stack a core is attached to.
  uint64_t hbm_base_of_core(uint32_t core) const;

  /// Optional allocator view used by the validator ("hbm-bounds").
  void set_hbm_range_check(std::function<bool(uint64_t, uint64_t)> fn);

  /// Validates and queues a program (copied) for a core; throws ValidationError.
  void submit(uint32_t core, const Program& program);
  /// Runs every submitted program until the device is idle. Throws DeadlockError (the device
  /// stays usable) or rethrows an engine's error.
  RunResult run();
  /// submit + run for one core. `validated`: the caller already validated this program against
  /// memory that is still live (a cached program moved to new tensors), so it skips validation.
  RunResult run(uint32_t core, const Program& program, bool validated = false);

  /// A copy between host memory and a core's HBM over the host link (PCIe), through the DMA
  /// fabric (it shares the HBM stack's bandwidth). Runs until the device is idle; the data itself
  /// is moved by the caller (HBM is host-addressable).
  struct HostCopy {
    sim::SimTime start, end;
  };
  HostCopy host_copy(uint32_t core, uint64_t bytes, bool to_device, uint64_t hbm_address);

  /// Advances the simulated clock with nothing running (host-side gaps, e.g. launch overhead).
  void advance(sim::SimTime delta);
  sim::SimTime now() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuronsim::device
