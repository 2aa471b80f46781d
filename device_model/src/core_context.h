#pragma once
// What the engines of one NeuronCore share: parameters, memories, semaphores, the DMA fabric,
// the trace sink and statistics. Owned by NeuronCore; engines hold a reference.
#include <exception>
#include <string>
#include <vector>

#include "busy_union.h"
#include "dma_fabric.h"
#include "neuronsim/device_model/exec_mode.h"
#include "neuronsim/device_model/memory.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/trace_names.h"
#include "neuronsim/sim/stats.h"
#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/sim/units.h"
#include "occupancy.h"
#include "semaphore_bank.h"

namespace neuronsim::device_model {

struct CoreContext {
  uint32_t index = 0;
  uint32_t logical_core_size = 1;  // chip.logical_core_size: physical cores per logical core
  const ChipParams* chip = nullptr;
  const CoreParams* core = nullptr;
  const ExecMode* mode = nullptr;
  MemoryMap mem{};
  SemaphoreBank* sems = nullptr;
  /// The semaphores of every program instance of the running launch, by pcore (this core's among
  /// them): where a sem_signal with sem_pcore >= 0 adds. One entry for a grid-1 launch.
  std::vector<SemaphoreBank*> grid_sems;
  DmaFabric* fabric = nullptr;
  uint32_t hbm_stack = 0;  // the stack this core is attached to
  sim::TraceSink* sink = nullptr;
  sim::StatsRegistry* stats = nullptr;
  std::string program_name;
  /// The running program's source locations (Program::sources): instruction slices name theirs.
  const std::vector<std::string>* sources = nullptr;
  /// Per ProgramSection of the running program: when its last instruction's result became
  /// visible on any stream (the trace draws one slice per section).
  std::vector<sim::SimTime> section_end;

  /// The core's DMA queues taken together: their busy time's union ("nc0.dma.busy_ps").
  BusyUnion dma_busy;

  // Occupancy counters (tracing only).
  OccupancyTracker sbuf_occupancy{128}, psum_occupancy{128};
  sim::TrackId sbuf_track = 0, psum_track = 0;

  // Set when an engine fails or a deadlock is being unwound.
  bool abort = false;
  std::exception_ptr error;

  bool timing() const { return *mode != ExecMode::kFunctional; }
  bool functional() const { return *mode != ExecMode::kTiming; }
  bool tracing() const { return sink != nullptr && sink->enabled(); }
  /// Trace process: the logical core's ("nc<its first physical core>"); rows of its physical
  /// cores carry row_prefix() ("pcore1 ") when the logical core has several.
  std::string process_name() const { return core_trace_process(index, logical_core_size); }
  std::string row_prefix() const { return core_trace_row_prefix(index, logical_core_size); }
};

}  // namespace neuronsim::device_model
