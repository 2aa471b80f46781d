#include "accelerator/context.h"
#include "host_stages.h"

#include <pthread.h>

#include <c10/util/Exception.h>

#include <unordered_map>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {
namespace {

thread_local c10::DeviceIndex t_current_device = 0;
thread_local std::unordered_map<c10::DeviceIndex, c10::StreamId> t_current_stream;
thread_local const sim::SimTime* t_event_time = nullptr;
bool g_bad_fork = false;

void mark_bad_fork() {
  if (runtime::Runtime::initialized()) g_bad_fork = true;
}

}  // namespace

std::recursive_mutex& runtime_mutex() {
  static std::recursive_mutex m;
  return m;
}

bool in_bad_fork() {
  return g_bad_fork;
}

void rethrow_as_torch_error() {
  try {
    throw;
  } catch (const device_model::OutOfMemoryError& e) {
    // TorchNeuron's allocator reports "NRT allocation failed for size N (OOM)" (a RuntimeError;
    // torch.OutOfMemoryError is one): its words first, then what the allocator held.
    TORCH_CHECK_WITH(OutOfMemoryError, false, "NRT allocation failed for size ", e.requested(),
                     " (OOM): ", e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

runtime::Runtime& rt() {
  TORCH_CHECK(!g_bad_fork,
              "Cannot re-initialize the neuron device in a forked subprocess. To use neuron "
              "tensors with multiprocessing (e.g. DataLoader workers), use the 'spawn' start "
              "method, or keep worker code on the CPU.");
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, mark_bad_fork); });
  try {
    return runtime::Runtime::instance();
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    rethrow_as_torch_error();
  }
}

void free_device_memory(void* ptr) {
  if (!ptr || !runtime::Runtime::initialized()) return;
  sim::HostStageScope stage(stages::kAlloc);
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  runtime::Runtime::instance().free(ptr);
}

c10::DeviceIndex device_count_noexcept() noexcept {
  try {
    return device_count();
  } catch (...) {
    return 0;
  }
}

c10::DeviceIndex device_count() {
  try {
    if (runtime::Runtime::initialized()) {
      return static_cast<c10::DeviceIndex>(runtime::Runtime::instance().device_count());
    }
    return static_cast<c10::DeviceIndex>(
        runtime::Runtime::visible_device_count(runtime::Runtime::pending()));
  } catch (...) {
    rethrow_as_torch_error();
  }
}

void check_device_index(c10::DeviceIndex index) {
  const auto n = device_count();
  TORCH_CHECK(index >= 0 && index < n, "Invalid neuron device index ", static_cast<int>(index),
              ": ", static_cast<int>(n),
              " neuron devices are visible (NEURON_RT_VISIBLE_CORES / "
              "NEURON_RT_NUM_CORES select them)");
}

c10::DeviceIndex current_device() {
  return t_current_device;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_current_device = index;
}

c10::Stream default_stream(c10::DeviceIndex index) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), 0);
}

c10::Stream current_stream(c10::DeviceIndex index) {
  if (index < 0) index = t_current_device;
  auto it = t_current_stream.find(index);
  const c10::StreamId id = it == t_current_stream.end() ? 0 : it->second;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, index), id);
}

void set_current_stream(const c10::Stream& stream) {
  t_current_stream[stream.device_index()] = stream.id();
}

ScopedEventTime::ScopedEventTime(sim::SimTime time) : saved_(t_event_time), time_(time) {
  t_event_time = &time_;
}
ScopedEventTime::~ScopedEventTime() {
  t_event_time = saved_;
}
const sim::SimTime* ScopedEventTime::current() {
  return t_event_time;
}

}  // namespace neuronsim::backend
