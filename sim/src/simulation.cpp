#include "neuronsim/sim/simulation.h"

#include <cstdlib>

#include <systemc>

#if defined(__SANITIZE_ADDRESS__)
#define NEURONSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NEURONSIM_ASAN 1
#endif
#endif
#ifdef NEURONSIM_ASAN
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace neuronsim::sim {
namespace {

// Under AddressSanitizer: SystemC 2.3.4 (Debian's build, QuickThreads coroutines) announces its
// stack switches to ASan, but a switch back to the main coroutine names the stack [0, 0) (the
// main coroutine's stack fields are never set; sc_cor_pkg_qt::yield passes them as they are), and
// a thread's end (sc_cor_pkg_qt::abort) is not announced at all. So once sc_start returns, ASan
// believes the caller runs on an empty stack: every throw from it then skips ASan's unpoisoning of
// the frames it unwinds ("ASan is ignoring requested __asan_handle_no_return: stack type: default
// top: 0x000000000000"), and that stale poison is later reported as a stack-buffer-overflow in
// code that did nothing wrong (the deadlock-recovery tests: DeadlockError thrown by Device::run).
// A standalone program (one SC_THREAD, sc_start, two throws on the caller's stack) shows the same
// report with nothing of neuronsim. The cure: after every return from the kernel, announce the
// calling thread's real stack (a switch from that stack to itself).
void restore_caller_stack() {
#ifdef NEURONSIM_ASAN
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* base = nullptr;
  size_t size = 0;
  const bool ok = pthread_attr_getstack(&attr, &base, &size) == 0;
  pthread_attr_destroy(&attr);
  if (!ok) return;
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, base, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

}  // namespace

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
  restore_caller_stack();
}

void Simulation::run_for(SimTime duration) {
  sc_core::sc_start(sc_core::sc_time::from_value(duration.ps));
  restore_caller_stack();
}

SimTime Simulation::now() {
  return {static_cast<uint64_t>(sc_core::sc_time_stamp().value())};
}

}  // namespace neuronsim::sim
