#pragma once
// The observer behind op tracking: a global RecordFunction callback on ATen ops that sees every
// op the dispatcher runs (composite ops before they decompose included). An op is tracked when
// a neuron tensor or device is among its arguments and it is not called from inside one of the
// backend's own kernels; the backend's kernels tell the open ops whether they ran natively or
// took the CPU fallback (thread-local counters, no lock on the per-op path). An op did device
// work when a kernel reported native work inside it, an op inside it did, or, with no tracked
// op inside it, its own kernel is a backend kernel (registered for PrivateUse1) whose schema is
// not a view's; an op without device work is metadata-only and not recorded (op_tracking.h).
#include <ATen/record_function.h>

#include <cstdint>
#include <optional>

namespace neuronsim::backend {

/// Installs (true) or removes (false) the observer. Installed when the extension loads.
void set_op_observer(bool enabled);
bool op_observer_enabled();

/// Ops of the observer open on this thread (tracked ones only).
int open_tracked_ops();
/// Counted by the backend's kernels; the observer compares them around each op.
void note_fallback_in_open_ops();
void note_native_in_open_ops();
void note_32bit_in_open_ops();

/// Marks a backend kernel running on this thread: the ops it dispatches internally (output
/// allocation, host copies) are its implementation, not ops of the user's program. The op
/// observer ignores them (a thread-local depth it reads first). When thread-local RecordFunction
/// callbacks are installed (the profiler's), RecordFunction is also turned off inside the kernel,
/// so they see the op itself only. Without them it stays on: turning it off and on again
/// rebuilds the thread's callback lists twice per op (a lock and copies, about 0.5 us), more
/// than the few internal ops cost the observer's early return.
class BackendKernelScope {
 public:
  BackendKernelScope();
  ~BackendKernelScope();
  BackendKernelScope(const BackendKernelScope&) = delete;
  BackendKernelScope& operator=(const BackendKernelScope&) = delete;

 private:
  std::optional<at::RecordFunctionGuard> guard_;
};

}  // namespace neuronsim::backend
