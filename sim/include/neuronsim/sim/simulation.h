#pragma once
// A thin layer over the SystemC kernel. One kernel per process: modules are elaborated once, then
// each batch of submitted work runs with run_until_idle(); simulated time only moves forward.
#include <string>

#include "neuronsim/sim/units.h"

namespace neuronsim::sim {

class Simulation {
 public:
  /// Sets the time resolution (1 ps) and silences the banner. Idempotent; call before the first
  /// SystemC object is constructed.
  static void prepare();
  /// True once the first run has started: no new modules can be created after that (E529).
  static bool started();
  /// Runs until no event is pending anywhere (every engine idle or blocked).
  static void run_until_idle();
  /// Runs the kernel for `duration` of simulated time (zero: one evaluation at the current time).
  static void run_for(SimTime duration);
  /// The current simulated time.
  static SimTime now();
};

}  // namespace neuronsim::sim
