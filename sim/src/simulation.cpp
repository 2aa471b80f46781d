#include "neuronsim/sim/simulation.h"

#include <cstdlib>

#include <systemc>

namespace neuronsim::sim {

void Simulation::prepare() {
  static bool done = false;
  if (done) return;
  done = true;
  // The banner goes to stdout, where tools print machine-readable output.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  // Deadlocks and model errors are reported by neuronsim itself; SystemC must not abort.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ERROR,
                                          sc_core::SC_DISPLAY | sc_core::SC_THROW);
  sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
}

bool Simulation::started() {
  return sc_core::sc_start_of_simulation_invoked();
}

void Simulation::run_until_idle() {
  sc_core::sc_start();
}

SimTime Simulation::now() {
  return {static_cast<uint64_t>(sc_core::sc_time_stamp().value())};
}

}  // namespace neuronsim::sim
