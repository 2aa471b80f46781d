#pragma once
// What the engines of one NeuronCore share: parameters, memories, semaphores, the DMA fabric,
// the trace sink and statistics. Owned by NeuronCore; engines hold a reference.
#include <exception>
#include <string>
#include <vector>

#include "dma_fabric.h"
#include "neuronsim/device/device.h"
#include "neuronsim/device/memory.h"
#include "neuronsim/device/params.h"
#include "occupancy.h"
#include "semaphore_bank.h"

namespace neuronsim::device {

struct CoreContext {
  uint32_t index = 0;
  const ChipParams* chip = nullptr;
  const CoreParams* core = nullptr;
  const ExecMode* mode = nullptr;
  MemoryMap mem{};
  SemaphoreBank* sems = nullptr;
  DmaFabric* fabric = nullptr;
  uint32_t hbm_stack = 0;  // the stack this core is attached to
  sim::TraceSink* sink = nullptr;
  sim::StatsRegistry* stats = nullptr;
  std::string program_name;
  /// Per ProgramSection of the running program: when its last instruction's result became
  /// visible on any stream (the trace draws one slice per section).
  std::vector<sim::SimTime> section_end;

  // Occupancy counters (tracing only).
  OccupancyTracker sbuf_occupancy{128}, psum_occupancy{128};
  sim::TrackId sbuf_track = 0, psum_track = 0;

  // Set when an engine fails or a deadlock is being unwound.
  bool abort = false;
  std::exception_ptr error;

  bool timing() const { return *mode != ExecMode::kFunctional; }
  bool functional() const { return *mode != ExecMode::kTiming; }
  bool tracing() const { return sink != nullptr && sink->enabled(); }
  std::string process_name() const { return "nc" + std::to_string(index); }
};

}  // namespace neuronsim::device
