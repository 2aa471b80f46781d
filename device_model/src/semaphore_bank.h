#pragma once
// A core's semaphores. Engines wait for a value; signals may be scheduled for a future time (an
// instruction's result becomes visible after its pipeline latency).
#include <memory>
#include <queue>
#include <vector>

#include <systemc>

#include "neuronsim/sim/units.h"

namespace neuronsim::device_model {

class SemaphoreBank : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(SemaphoreBank);
  SemaphoreBank(sc_core::sc_module_name name, uint32_t count);

  void reset();
  int64_t value(uint32_t sem) const { return values_[sem]; }
  /// Blocks the calling thread until value >= target or `abort` becomes true.
  void wait_at_least(uint32_t sem, int64_t target, const bool& abort);
  /// Adds `delta` at simulated time `when` (now if in the past).
  void signal_at(uint32_t sem, int64_t delta, sim::SimTime when);
  /// Wakes every waiter (used to unwind engines after a deadlock or error).
  void wake_all();
  /// When the semaphore first reached `target` (values only grow); call once it has.
  sim::SimTime reached_at(uint32_t sem, int64_t target) const;

 private:
  struct Pending {
    uint64_t when_ps;
    uint64_t seq;
    uint32_t sem;
    int64_t delta;
    bool operator>(const Pending& o) const {
      return when_ps != o.when_ps ? when_ps > o.when_ps : seq > o.seq;
    }
  };
  void apply_due();
  void arm();
  void add(uint32_t sem, int64_t delta, uint64_t now_ps);

  std::vector<int64_t> values_;
  // (value, time in ps) after every change, per semaphore: when a wait's condition became true.
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> history_;
  std::vector<uint32_t> touched_;  // semaphores changed since the last reset
  std::vector<std::unique_ptr<sc_core::sc_event>> changed_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  sc_core::sc_event tick_;
  uint64_t seq_ = 0;
};

}  // namespace neuronsim::device_model
