// neuronsim._C: the Python entry points of the neuron backend.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "accelerator/context.h"
#include "accelerator/generator.h"
#include "accelerator/hooks.h"
#include "aten/native_boxed.h"
#include "aten/native_ops.h"
#include "aten/op_observer.h"
#include "aten/op_tracking.h"
#include "distributed/bindings.h"
#include "neuronsim/kernels/ops/op_rule.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"
#include "python/fallback_call.h"
#include "python/graph_bindings.h"
#include "python/nki_bindings.h"
#include "python/run_log_bindings.h"
#include "python/trace_tools.h"

#include <ATen/record_function.h>

namespace py = pybind11;
using namespace neuronsim;
using namespace neuronsim::backend;

namespace {

py::dict memory_stats(int dev) {
  py::dict out;
  if (!runtime::Runtime::initialized()) return out;
  const auto s = with_runtime([&](runtime::Runtime& r) { return r.allocator(dev).stats(); });
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const runtime::StatArray& a) {
    for (int i = 0; i < 3; ++i) {
      const std::string p = std::string(name) + "." + pools[i] + ".";
      out[py::str(p + "current")] = a[i].current;
      out[py::str(p + "peak")] = a[i].peak;
      out[py::str(p + "allocated")] = a[i].allocated;
      out[py::str(p + "freed")] = a[i].freed;
    }
  };
  add("allocation", s.allocation);
  add("segment", s.segment);
  add("active", s.active);
  add("inactive_split", s.inactive_split);
  add("allocated_bytes", s.allocated_bytes);
  add("reserved_bytes", s.reserved_bytes);
  add("active_bytes", s.active_bytes);
  add("inactive_split_bytes", s.inactive_split_bytes);
  add("requested_bytes", s.requested_bytes);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["num_sync_all_streams"] = 0;
  out["max_split_size"] = -1;  // unlimited, as CUDA reports without PYTORCH_CUDA_ALLOC_CONF
  for (const char* k : {"oversize_allocations", "oversize_segments"}) {
    for (const char* f : {"current", "peak", "allocated", "freed"}) {
      out[py::str(std::string(k) + "." + f)] = 0;
    }
  }
  return out;
}

// The caching allocator's segments and blocks with torch.cuda.memory_snapshot()'s keys;
// addresses are data pointers, so a block's address is its tensor's data_ptr().
py::list memory_snapshot(int dev) {
  py::list out;
  if (!runtime::Runtime::initialized()) return out;
  with_runtime([&](runtime::Runtime& r) {
    const auto base = reinterpret_cast<uint64_t>(r.device().hbm_data());
    for (const auto& seg : r.allocator(dev).snapshot()) {
      py::list blocks;
      for (const auto& b : seg.blocks) {
        py::dict block;
        block["address"] = base + b.address;
        block["size"] = b.size;
        block["requested_size"] = b.requested_size;
        block["state"] = b.allocated ? "active_allocated" : "inactive";
        block["frames"] = py::list();
        blocks.append(block);
      }
      py::dict d;
      d["device"] = dev;
      d["address"] = base + seg.address;
      d["total_size"] = seg.total_size;
      d["allocated_size"] = seg.allocated_size;
      d["active_size"] = seg.allocated_size;  // no frees wait on other streams
      d["requested_size"] = seg.requested_size;
      d["stream"] = 0;
      d["segment_type"] = seg.small ? "small" : "large";
      d["segment_pool_id"] = py::make_tuple(0, 0);
      d["is_expandable"] = false;
      d["frames"] = py::list();
      d["blocks"] = blocks;
      out.append(d);
    }
    return 0;
  });
  return out;
}

// torch.profiler.record_function ranges (RecordScope::USER_SCOPE) onto the trace's Python row.
std::unique_ptr<at::ObserverContext> on_user_range_enter(const at::RecordFunction& fn) {
  if (!runtime::TraceSession::active()) return nullptr;
  with_runtime([&](runtime::Runtime& r) {
    if (runtime::TraceSession* t = runtime::TraceSession::active()) t->range_push(r, fn.name());
    return 0;
  });
  return nullptr;
}
void on_user_range_exit(const at::RecordFunction&, at::ObserverContext*) {
  if (!runtime::TraceSession::active()) return;
  with_runtime([](runtime::Runtime& r) {
    if (runtime::TraceSession* t = runtime::TraceSession::active()) t->range_pop(r);
    return 0;
  });
}
at::CallbackHandle g_range_callback = 0;

// One empty backward through device `dev`'s autograd thread, with the GIL released (the thread
// may need it to free the task before this one): see python/neuronsim/_autograd_exit.py. Every
// tensor is made here, none has a Python object, so the thread frees this task without the GIL.
void drain_autograd_thread(int dev) {
  py::gil_scoped_release no_gil;
  const auto on_dev = at::TensorOptions().device(c10::Device(c10::DeviceType::PrivateUse1, dev));
  const at::Tensor leaf = at::empty({1}, on_dev).requires_grad_(true);
  torch::autograd::grad({leaf.view({1})}, {leaf}, {at::empty({1}, on_dev)});
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "neuronsim: the simulated Trainium NeuronCore as a PyTorch device";
  bind_trace_tools(m);
  bind_run_log(m);
  register_graph_bindings(m);
  bind_fallback_call(m);
  bind_nki(m);
  m.def("_init", [] {
    register_hooks();
    register_native_ops();
  });
  m.def("_configure", [](const std::string& preset, const std::vector<std::string>& overrides,
                         const std::vector<uint32_t>& visible, bool blocking, bool isa) {
    runtime::RuntimeConfig c;
    c.preset = preset;
    c.overrides = overrides;
    c.visible_cores = visible;
    c.launch_blocking = blocking;
    c.isa_mode = isa;
    try {
      // Validate first so a bad preset or key fails here with its message and leaves the
      // previous configuration in place.
      runtime::Runtime::visible_device_count(c);
      runtime::Runtime::configure(c);
    } catch (...) {
      rethrow_as_torch_error();
    }
  });
  m.def("_config", [] {
    const auto& c = runtime::Runtime::pending();
    py::dict d;
    d["preset"] = c.preset;
    d["overrides"] = c.overrides;
    d["visible_cores"] = c.visible_cores;
    d["launch_blocking"] = c.launch_blocking;
    d["isa_mode"] = c.isa_mode;
    return d;
  });
  m.def("_set_isa_mode", [](bool on) {
    with_runtime([&](runtime::Runtime& r) {
      r.set_isa_mode(on);
      return 0;
    });
  });
  m.def("_isa_mode", [] { return isa_mode(); });
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_device_count_noexcept", [] { return static_cast<int>(device_count_noexcept()); });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_is_initialized", [] { return runtime::Runtime::initialized(); });
  m.def("_lazy_init", [] { with_runtime([](runtime::Runtime&) { return 0; }); });
  m.def("_is_in_bad_fork", [] { return in_bad_fork(); });
  m.def("_synchronize", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    with_runtime([](runtime::Runtime& r) {
      r.synchronize();
      return 0;
    });
  });
  m.def("_device_name", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    return with_runtime([&](runtime::Runtime& r) { return r.device_name(d); });
  });
  m.def("_device_properties", [](int d) {
    return with_runtime([&](runtime::Runtime& r) {
      py::dict p;
      const auto& chip = r.device().params();
      p["name"] = r.device_name(d);
      p["total_memory"] = r.segments(d).capacity();
      p["preset"] = chip.preset_name;
      p["instance"] = chip.instance_name;
      p["physical_core"] = r.physical_core(d);
      // The logical core (a VNC in the Neuron runtime's terms) and its physical cores.
      p["logical_core_size"] = chip.logical_core_size;
      p["logical_core"] = r.physical_core(d) / chip.logical_core_size;
      p["tensor_peak_flops"] = chip.tensor_peak_flops();
      p["hbm_bandwidth_bytes_per_s"] = chip.hbm.bandwidth_bytes_per_s;
      return p;
    });
  });
  m.def("_memory_stats", &memory_stats);
  m.def("_drain_autograd_thread", &drain_autograd_thread);
  m.def("_memory_snapshot", &memory_snapshot);
  m.def("_mem_get_info", [](int d) {
    return with_runtime([&](runtime::Runtime& r) { return r.allocator(d).mem_info(); });
  });
  m.def("_empty_cache", [] {
    if (!runtime::Runtime::initialized()) return;
    with_runtime([](runtime::Runtime& r) {
      for (uint32_t d = 0; d < r.device_count(); ++d) r.allocator(d).empty_cache();
      return 0;
    });
  });
  m.def("_reset_peak_memory_stats", [](int d) {
    with_runtime([&](runtime::Runtime& r) {
      r.allocator(d).reset_peak_stats();
      return 0;
    });
  });
  m.def("_reset_accumulated_memory_stats", [](int d) {
    with_runtime([&](runtime::Runtime& r) {
      r.allocator(d).reset_accumulated_stats();
      return 0;
    });
  });
  m.def("_host_time_ns",
        [] { return with_runtime([](runtime::Runtime& r) { return r.host_time().ns(); }); });
  m.def("_device_time_ns",
        [] { return with_runtime([](runtime::Runtime& r) { return r.device_time().ns(); }); });
  m.def("_launches", [] { return with_runtime([](runtime::Runtime& r) { return r.launches(); }); });
  // Where the time went so far, the engines' busy time and what limits the run, as JSON.
  m.def("_time_report",
        [] { return with_runtime([](runtime::Runtime& r) { return r.time_report().dump(); }); });
  // Whether the kernel library models an op ("aten::addmm"; in-place forms count as theirs).
  m.def("_has_device_kernel", [](const std::string& op) { return find_native_op(op) != nullptr; });
  // The op library's rules (kernels/ops/op_rule.h): per op, whether it has an eager program and
  // whether it fuses under torch.compile (an expression or a lowering), and whether it is a view.
  m.def("_op_rules", [] {
    py::list out;
    for (const kernels::ops::OpRule& r : kernels::ops::op_rules()) {
      py::dict d;
      d["name"] = r.name;
      d["eager"] = static_cast<bool>(r.build);
      d["fuses"] = static_cast<bool>(r.expr.build) || static_cast<bool>(r.lower);
      d["expression"] = static_cast<bool>(r.expr.build);
      d["metadata_only"] = r.metadata_only;
      out.append(d);
    }
    return out;
  });
  m.def("_device_stats_json", [] {
    return with_runtime([](runtime::Runtime& r) { return r.device().stats().to_json().dump(); });
  });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  // DTensor's offset region on a device's default generator (python/neuronsim/_dtensor_rng.py).
  m.def("_set_philox_region", [](int d, bool open) {
    at::Generator g = default_generator(static_cast<c10::DeviceIndex>(d));  // a handle
    std::lock_guard<std::mutex> lock(g.mutex());
    at::check_generator<NeuronGenerator>(g)->set_region(open);
  });
  m.def("_trace_start", [](const std::string& path) {
    with_runtime([&](runtime::Runtime& r) {
      runtime::TraceSession::start(r, path);
      return 0;
    });
    if (!g_range_callback) {
      g_range_callback = at::addGlobalCallback(
          at::RecordFunctionCallback(&on_user_range_enter, &on_user_range_exit)
              .scopes({at::RecordScope::USER_SCOPE}));
    }
  });
  m.def("_trace_stop", [](const std::string& metadata_json) {
    if (g_range_callback) {
      at::removeCallback(g_range_callback);
      g_range_callback = 0;
    }
    with_runtime([&](runtime::Runtime& r) {
      runtime::TraceSession::stop(r, nlohmann::json::parse(metadata_json));
      return 0;
    });
  });
  m.def("_trace_active", [] { return runtime::TraceSession::active() != nullptr; });
  m.def("_range_push", [](const std::string& name) {
    if (!runtime::TraceSession::active()) return;
    with_runtime([&](runtime::Runtime& r) {
      if (runtime::TraceSession* t = runtime::TraceSession::active()) t->range_push(r, name);
      return 0;
    });
  });
  m.def("_range_pop", [] {
    if (!runtime::TraceSession::active()) return;
    with_runtime([&](runtime::Runtime& r) {
      if (runtime::TraceSession* t = runtime::TraceSession::active()) t->range_pop(r);
      return 0;
    });
  });
  m.def("_executed_ops", [] { return OpTracker::get().executed(); });
  m.def("_fallback_ops", [] { return OpTracker::get().fallbacks(); });
  m.def("_isa_host_ops", [] { return OpTracker::get().isa_host_ops(); });
  m.def("_clear_op_tracking", [] { OpTracker::get().clear(); });
  // What code outside the backend ran (TorchNeuron's _log_executed_op / _log_offloaded_op):
  // one run of the named op, executed on the device or on the CPU.
  m.def("_log_op", [](const std::string& name, bool fallback) {
    OpTracker& t = OpTracker::get();
    t.record(t.intern(name), fallback, false);
  });
  m.def("_set_op_observer", &set_op_observer);
  m.def("_op_observer_enabled", &op_observer_enabled);
  distributed::register_bindings(m);
  m.def("_op_counts", [] {
    py::dict out;
    for (const auto& [name, c] : OpTracker::get().counts()) {
      py::dict d;
      d["native"] = c.native;
      d["fallback"] = c.fallback;
      d["computed_at_32_bits"] = c.computed_at_32_bits;
      out[py::str(name)] = d;
    }
    return out;
  });
  // NEURONSIM_HOST_PROFILE=1: host wall time per stage of the per-op path (sim/host_profile.h).
  m.def("_host_profile", [] {
    py::dict out;
    for (const sim::HostStageTotal& t : sim::HostProfile::totals()) {
      out[py::str(t.name)] = py::make_tuple(t.ns, t.entries);
    }
    return out;
  });
  m.def("_host_profile_enabled", [] { return sim::HostProfile::enabled(); });
  m.def("_host_profile_reset", [] { sim::HostProfile::reset(); });
  // (hits, misses, entries) of the program cache (runtime/program_cache.h).
  m.def("_program_cache_stats", [] {
    return with_runtime([](runtime::Runtime& r) {
      const runtime::ProgramCache& c = r.program_cache();
      return py::make_tuple(c.hits(), c.misses(), c.size());
    });
  });
}
