#include "aten/op_observer.h"
#include "host_stages.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>

#include "aten/op_tracking.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {
namespace {

// One op the observer has open on this thread.
struct Frame {
  int32_t id = -1;         // the op's id in the tracker; -1: not tracked
  bool leaf_work = false;  // its own kernel does device work (see op_observer.h)
  int uncaught = 0;  // std::uncaught_exceptions() at entry (an op that raised is not executed)
  uint64_t fallbacks = 0, at32 = 0, work = 0, started = 0;  // the thread's counters at entry
};

// Trivially destructible thread-locals: ops may still run while a thread is torn down. Ops
// nested deeper than the stack holds are not tracked.
constexpr int kMaxDepth = 256;
thread_local Frame t_frames[kMaxDepth];
thread_local int t_depth = 0;
thread_local int t_open = 0;
thread_local uint64_t t_fallbacks = 0, t_at32 = 0;
thread_local uint64_t t_work = 0;     // ops (and kernels) that did device work
thread_local uint64_t t_started = 0;  // tracked ops entered
thread_local int t_kernel_depth = 0;  // open BackendKernelScopes

std::mutex g_mutex;
at::CallbackHandle g_handle = 0;

// Wrapper tensors (fake, functional, vmap-batched, Python subclasses such as DTensor) report
// the neuron device but their ops run again on the real tensors underneath (or not at all).
const c10::DispatchKeySet kWrappers({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                     c10::DispatchKey::FuncTorchBatched});

bool device_tensor(const at::Tensor& t) {
  if (!t.defined()) return false;
  const c10::DispatchKeySet ks = t.key_set();
  return ks.has_backend(c10::BackendComponent::PrivateUse1Bit) && !ks.has_any(kWrappers);
}

bool involves_neuron(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& v : inputs) {
    if (v.isTensor()) {
      if (device_tensor(v.toTensor())) return true;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        if (device_tensor(t)) return true;
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && device_tensor(e.toTensor())) return true;
      }
    } else if (v.isDevice()) {
      if (v.toDevice().is_privateuseone()) return true;
    }
  }
  return false;
}

struct OpInfo {
  int32_t id = -1;
  bool leaf_work = false;
};

// A backend kernel (registered for PrivateUse1, not a composite's) that is not a view: when it
// runs, the device does something (computes, allocates, copies, resizes, reads a value).
bool kernel_does_work(const c10::OperatorName& name) {
  const auto op = c10::Dispatcher::singleton().findOp(name);
  if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return false;
  for (const c10::Argument& r : op->schema().returns()) {
    const c10::AliasInfo* a = r.alias_info();
    if (a && !a->isWrite()) return false;  // returns a view of an input
  }
  return true;
}

// The tracker id of an ATen op (-1 for anything else) and whether its own kernel does work.
// Cached per thread by the schema's name pointer (each overload's schema owns its name string,
// so the pointer names the overload too); the cache is leaked with its thread for the same
// reason as the frames.
OpInfo op_info(const at::RecordFunction& fn) {
  thread_local auto* cache = new std::unordered_map<const char*, OpInfo>();
  const char* key = fn.name();
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const std::optional<c10::OperatorName> op = fn.operator_name();
  if (!op) return {};  // a named range, not an operator: its name string is not stable
  OpInfo info;
  if (op->name.rfind("aten::", 0) == 0) {
    info.id = OpTracker::get().intern(OpTracker::full_name(*op));
    info.leaf_work = kernel_does_work(*op);
  }
  cache->emplace(key, info);
  return info;
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  sim::HostStageScope stage(stages::kObserver);
  const int depth = t_depth++;
  if (depth >= kMaxDepth) return nullptr;
  Frame& f = t_frames[depth];
  f.id = -1;
  if (t_kernel_depth > 0) return nullptr;  // inside a backend kernel: its implementation
  // Under a Python dispatch mode (fake tensors while compiling) the op runs again below the
  // mode on real tensors, or not at all.
  if (c10::impl::tls_local_dispatch_key_set().included_.has(c10::DispatchKey::Python)) {
    return nullptr;
  }
  const OpInfo info = op_info(fn);
  if (info.id < 0 || !involves_neuron(fn.inputs())) return nullptr;
  f.id = info.id;
  f.leaf_work = info.leaf_work;
  f.uncaught = std::uncaught_exceptions();
  f.fallbacks = t_fallbacks;
  f.at32 = t_at32;
  f.work = t_work;
  f.started = ++t_started;
  ++t_open;
  return nullptr;
}

void on_exit(const at::RecordFunction& /*fn*/, at::ObserverContext* /*ctx*/) {
  sim::HostStageScope stage(stages::kObserver);
  if (t_depth == 0) return;  // entered before the observer was installed
  const int depth = --t_depth;
  if (depth >= kMaxDepth) return;
  const Frame f = t_frames[depth];
  if (f.id < 0) return;
  --t_open;
  const bool fell_back = t_fallbacks != f.fallbacks;
  if (std::uncaught_exceptions() > f.uncaught && !fell_back) return;  // the op raised
  if (fell_back) {
    OpTracker::get().record(f.id, true, false);
    return;
  }
  const bool nested = t_started != f.started;
  if (t_work == f.work && (nested || !f.leaf_work)) return;  // metadata only
  ++t_work;
  OpTracker::get().record(f.id, false, t_at32 != f.at32);
}

// Installed when the extension loads, unless NEURON_SIM_OP_TRACKING=0.
const bool g_installed = [] {
  const char* v = std::getenv("NEURON_SIM_OP_TRACKING");
  const bool on = !(v && std::strcmp(v, "0") == 0);
  if (on) set_op_observer(true);
  return on;
}();

}  // namespace

BackendKernelScope::BackendKernelScope() {
  if (at::hasThreadLocalCallbacks()) guard_.emplace(false);
  ++t_kernel_depth;
}

BackendKernelScope::~BackendKernelScope() {
  --t_kernel_depth;
}

void set_op_observer(bool enabled) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (enabled && g_handle == 0) {
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_enter, &on_exit)
                                         .needsInputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
  } else if (!enabled && g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
}

bool op_observer_enabled() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_handle != 0;
}

int open_tracked_ops() {
  return t_open;
}

void note_fallback_in_open_ops() {
  ++t_fallbacks;
}

void note_native_in_open_ops() {
  ++t_work;
}

void note_32bit_in_open_ops() {
  ++t_at32;
}

}  // namespace neuronsim::backend
