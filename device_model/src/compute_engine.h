#pragma once
// TensorE, VectorE, ScalarE and GpSimdE. Timing: an instruction issues once the engine is free and
// the data it reads (written by earlier instructions of this engine) is visible; it occupies the
// engine for its initiation interval; its result is visible a pipeline latency later. TensorE
// adds a LoadStationary unit that loads the next stationary while the current MultiplyMoving
// runs (ARCH-v2 "background LoadStationary").
#include <array>
#include <memory>

#include "neuronsim/device_model/cost_model.h"
#include "neuronsim/sim/clock.h"
#include "stream_engine.h"

namespace neuronsim::device_model {

class ComputeEngine : public StreamEngine {
 public:
  ComputeEngine(sc_core::sc_module_name name, CoreContext& ctx, EngineKind kind);
  void reset_trace_tracks() override { track_ = ls_track_ = 0; }

 protected:
  void run_instruction(const Instruction& in, size_t index) override;
  sim::SimTime drain() override;

 private:
  struct Written {
    MemSpace space = MemSpace::kSbuf;
    uint32_t p0 = 0, p1 = 0;
    int64_t lo = 0, hi = 0;
    sim::SimTime ready;
  };
  sim::SimTime data_ready(const AccessPattern& ap) const;
  sim::SimTime inputs_ready(const Instruction& in) const;
  void record_write(const AccessPattern& ap, sim::SimTime ready);
  void update_occupancy(const AccessPattern& ap, sim::SimTime t);

  std::unique_ptr<ComputeCostModel> cost_;
  sim::ClockDomain clock_;
  sim::SimTime engine_free_;
  // TensorE: the stationary currently held and the LoadStationary unit's timeline.
  bool holds_stationary_ = false;
  bool loaded_any_ = false;  // a stationary was loaded since the program started
  AccessPattern stationary_;
  sim::SimTime ls_free_, prev_mm_start_;
  std::array<Written, 16> written_{};
  size_t written_next_ = 0;
  sim::TrackId track_ = 0, ls_track_ = 0;
  const std::string unit_row_;  // the LoadStationary unit's trace row (engines.h)
  sim::StatsRegistry::Counter *instructions_, *busy_ps_, *busy_cycles_, *flops_;
};

}  // namespace neuronsim::device_model
