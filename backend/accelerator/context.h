#pragma once
// Process-wide glue between PyTorch and the neuronsim runtime: the current device and stream of
// each thread, serialised access to the (single-threaded) simulator, and translation of
// neuronsim errors into PyTorch's exception types.
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <mutex>

#include "neuronsim/runtime/runtime.h"

namespace neuronsim::backend {

/// Serialises all runtime calls: PyTorch calls in from Python threads and the autograd engine's
/// device threads; the SystemC kernel underneath is single-threaded.
std::recursive_mutex& runtime_mutex();

/// The runtime, created on first use; throws a c10::Error naming the problem (bad environment,
/// unknown preset) and refuses use in a process forked after initialisation.
runtime::Runtime& rt();

/// Resolves device pointers to HBM addresses through `r` (call it under the runtime lock).
inline std::function<uint64_t(const void*)> hbm_addresses(runtime::Runtime& r) {
  return [&r](const void* p) { return r.hbm_address(p); };
}

/// The deleter of device memory: frees it under the runtime lock, without the fork check or
/// error translation (it runs in destructors); a no-op once the runtime is gone or never was.
void free_device_memory(void* ptr);

/// Visible devices without creating the runtime; 0 when the configuration is invalid.
c10::DeviceIndex device_count_noexcept() noexcept;
c10::DeviceIndex device_count();
void check_device_index(c10::DeviceIndex index);

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

c10::Stream current_stream(c10::DeviceIndex index);
void set_current_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex index);

/// True in a child process forked after the runtime was initialised (DataLoader workers).
bool in_bad_fork();

/// While alive, events this thread records complete at `time` instead of when their stream's
/// work does: a collective's future, completed on a transport thread, carries the collective's
/// simulated end to the streams that wait on it.
class ScopedEventTime {
 public:
  explicit ScopedEventTime(sim::SimTime time);
  ~ScopedEventTime();
  ScopedEventTime(const ScopedEventTime&) = delete;
  ScopedEventTime& operator=(const ScopedEventTime&) = delete;
  /// The time in force on this thread, or null.
  static const sim::SimTime* current();

 private:
  const sim::SimTime* saved_;
  sim::SimTime time_;
};

/// Runs fn under the runtime lock, converting neuronsim errors to PyTorch errors
/// (OutOfMemoryError -> torch.OutOfMemoryError, others -> RuntimeError with the message).
template <typename Fn>
auto with_runtime(Fn&& fn) -> decltype(fn(rt()));
[[noreturn]] void rethrow_as_torch_error();

template <typename Fn>
auto with_runtime(Fn&& fn) -> decltype(fn(rt())) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  try {
    return fn(rt());
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    rethrow_as_torch_error();
  }
}

}  // namespace neuronsim::backend
