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

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/exec_mode.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/device_model/trace_names.h"
#include "neuronsim/sim/stats.h"
#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device_model {

struct DeviceOptions {
  /// NeuronCores to elaborate; 0 = every core of the configured instance's first chip.
  uint32_t cores = 0;
  ExecMode mode = ExecMode::kFull;
};

// Note [LNC launch]
// A logical NeuronCore of trn2 (LNC=2, chip.logical_core_size) is two physical cores sharing one
// HBM stack and address space (HARDWARE.md 1.10). Each physical core keeps its own engines, SBUF,
// PSUM, DMA queues and semaphores; their DMA shares the stack's bandwidth (the fabric's per-stack
// limit). A Program with grid N > 1, submitted to the first physical core of a logical core,
// runs its instance p (the streams with StreamId::pcore == p, NKI's nl.program_id()) on physical
// core first + p, all instances starting together; the launch ends when the last one ends. The
// instances meet through each other's semaphores (Instruction::sem_pcore: core_barrier,
// sendrecv). A grid beyond the logical core size (any grid > 1 on trn1) fails validation (rule
// "grid"). The trace shows both physical cores in the logical core's process: pcore 0's rows as
// a single core's ("TensorE", ...), pcore 1's as "pcore1 TensorE", ...

/// Timing of one launch (one core, or the physical cores of a grid launch from `core` on).
struct CoreRunResult {
  uint32_t core = 0;
  std::string program;
  sim::SimTime start, end;  // end: when the last program instance ended
  uint64_t instructions = 0;
  uint32_t grid = 1;
  /// Per program instance (grid > 1 only): when it ended.
  std::vector<sim::SimTime> instance_end;
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

  /// Validates and queues a program (copied) for a core; throws ValidationError. A program with
  /// grid > 1 occupies the next grid - 1 physical cores too (Note [LNC launch]); `core` must be
  /// the first physical core of a logical core.
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

}  // namespace neuronsim::device_model
