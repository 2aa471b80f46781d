#pragma once
// Base of every engine: a SystemC thread consuming one instruction stream. Semaphore waits and
// signals are handled here; data instructions go to the derived engine.
#include <string>

#include <systemc>

#include "core_context.h"
#include "neuronsim/device/program.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device {

class StreamEngine : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(StreamEngine);
  StreamEngine(sc_core::sc_module_name name, CoreContext& ctx, StreamId id);

  const StreamId& id() const { return id_; }
  /// Starts consuming `stream` (not owned; must outlive the run).
  void start(const Stream* stream);
  bool busy() const { return busy_; }
  /// When the engine finished its last stream (its last result became visible).
  sim::SimTime finish_time() const { return finish_; }
  uint64_t executed() const { return executed_; }
  /// For deadlock reports: what the engine is blocked on.
  std::string blocked_reason() const;
  /// A new trace sink was attached: forget the track ids created in the previous one.
  virtual void reset_trace_tracks() {}

 protected:
  /// Runs one data instruction. The thread's time is the issue time; implementations advance it.
  virtual void run_instruction(const Instruction& in, size_t index) = 0;
  /// Called when the stream ends: wait for outstanding work; returns when results are visible.
  virtual sim::SimTime drain() = 0;
  /// The stream may issue from `ready` on: at stream start (ready = now, first = true) and after
  /// a wait, whose condition became true at `ready` (possibly before the stream reached it).
  virtual void on_issue_point(sim::SimTime /*ready*/, bool /*first*/) {}
  /// When the result of the most recent data instruction becomes visible.
  sim::SimTime last_ready_;

  void wait_until(sim::SimTime t);
  void trace_slice(sim::TrackId& track, const std::string& row, std::string_view name,
                   sim::SimTime b, sim::SimTime e, nlohmann::json args);

  CoreContext& ctx_;
  StreamId id_;
  // id_.name() and id_.display_name(), formatted once: a trace records them per instruction.
  const std::string name_, display_name_;
  size_t pc_ = 0;

 private:
  void thread();
  const Stream* stream_ = nullptr;
  bool busy_ = false;
  sim::SimTime finish_;
  uint64_t executed_ = 0;
  sc_core::sc_event start_ev_;
  sim::StatsRegistry::Counter* stall_ps_ = nullptr;
};

}  // namespace neuronsim::device
