#pragma once
// Base of every engine: a SystemC thread consuming one instruction stream. Semaphore waits and
// signals are handled here; data instructions go to the derived engine.
#include <string>

#include <systemc>

#include "core_context.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::device_model {

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

  /// Moves the thread to `t` (no-op if it is past `t`). With deferred waits, only records it.
  void wait_until(sim::SimTime t);
  /// The thread's time: SystemC's, or ahead of it while waits are deferred.
  sim::SimTime thread_now() const;
  /// Set by an engine whose data instructions touch nothing another thread reads (its own
  /// timelines only): in timing-only mode without a trace, its thread then keeps its issue time
  /// in a variable instead of a SystemC wait() per instruction, and waits once, before it next
  /// meets other threads (a semaphore instruction, the end of the stream). Every time it
  /// computes is the same; the simulation kernel just schedules far fewer events.
  bool may_defer_waits_ = false;
  void trace_slice(sim::TrackId& track, const std::string& row, std::string_view name,
                   sim::SimTime b, sim::SimTime e, sim::TraceArgs args);

  CoreContext& ctx_;
  StreamId id_;
  // id_.name() and id_.display_name(), formatted once: a trace records them per instruction.
  const std::string name_, display_name_;
  size_t pc_ = 0;

 private:
  void thread();
  /// Performs the deferred wait: SystemC time catches up with the thread's.
  void catch_up();
  const Stream* stream_ = nullptr;
  bool defer_waits_ = false;  // for the current stream
  sim::SimTime local_;        // the thread's time while waits are deferred
  bool busy_ = false;
  sim::SimTime finish_;
  uint64_t executed_ = 0;
  sc_core::sc_event start_ev_;
  sim::StatsRegistry::Counter* stall_ps_ = nullptr;
};

}  // namespace neuronsim::device_model
