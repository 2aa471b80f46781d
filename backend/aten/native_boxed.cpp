#include "aten/native_boxed.h"
#include "aten/kernel_report.h"
#include "host_stages.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "accelerator/context.h"
#include "aten/capture_mode.h"
#include "aten/device_mismatch.h"
#include "aten/device_tensor.h"
#include "aten/isa_outputs.h"
#include "aten/map_tensors.h"
#include "aten/op_observer.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "aten/program_key.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"
#include "profiler/activity_recorder.h"

namespace neuronsim::backend {

namespace {

// Read once (getenv scans the environment; this is asked on every op).
bool exact_64bit() {
  static const bool exact = [] {
    const char* v = std::getenv("NEURON_SIM_EXACT_64BIT");
    return v && std::strcmp(v, "1") == 0;
  }();
  return exact;
}

// 64-bit data computed at 32 bits: the value the device would hold.
at::Tensor round_to_32(const at::Tensor& t) {
  if (t.scalar_type() == at::kDouble) return t.to(at::kFloat).to(at::kDouble);
  if (t.scalar_type() == at::kLong) return t.to(at::kInt).to(at::kLong);
  return t;
}

struct CpuArg {
  at::Tensor device;    // the original device tensor
  at::Tensor cpu;       // what the CPU kernel sees
  bool copied = false;  // cpu is not an alias of device memory (64-bit rounding, empty out)
};

at::Tensor to_cpu(const at::Tensor& t, bool emulate64, std::vector<CpuArg>& seen, bool* any64) {
  if (!is_neuron(t)) return t;
  CpuArg a{t, cpu_view(t), false};
  if (emulate64 && is_64bit(t.scalar_type())) {
    a.cpu = round_to_32(a.cpu);
    a.copied = true;
    *any64 = true;
  }
  seen.push_back(a);
  return a.cpu;
}

c10::IValue convert_arg(const c10::IValue& v, bool emulate64, std::vector<CpuArg>& seen,
                        bool* any64) {
  return map_tensors(v, [&](const at::Tensor& t) { return to_cpu(t, emulate64, seen, any64); });
}

// A CPU result becomes a device tensor (or the device tensor it aliases).
at::Tensor to_device(const at::Tensor& cpu, const std::vector<CpuArg>& seen, const c10::Device& dev,
                     bool emulate64) {
  if (!cpu.defined() || is_neuron(cpu)) return cpu;
  for (const CpuArg& a : seen) {
    if (!a.copied && a.cpu.defined() && cpu.is_alias_of(a.cpu) &&
        cpu.data_ptr() == a.cpu.data_ptr() && cpu.sizes().equals(a.cpu.sizes())) {
      return a.device;
    }
    if (a.copied && cpu.is_alias_of(a.cpu)) {
      // An in-place result on rounded 64-bit data: write it back to device memory.
      cpu_view(a.device).copy_(emulate64 ? round_to_32(cpu) : cpu);
      return a.device;
    }
  }
  at::Tensor src = emulate64 ? round_to_32(cpu) : cpu;
  // Straight from the device allocator, as the backend's empty_strided kernel does: not through
  // the dispatcher, whose RecordFunction call (inputs captured for the op observer) costs more
  // than the allocation for a small op.
  const c10::DeviceGuard guard(dev);
  at::Tensor out = at::detail::empty_strided_generic(
      src.sizes(), src.strides(), c10::GetAllocator(c10::DeviceType::PrivateUse1),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), src.scalar_type());
  if (src.is_non_overlapping_and_dense()) {
    if (src.numel()) std::memcpy(out.data_ptr(), src.data_ptr(), src.numel() * src.element_size());
  } else {
    cpu_view(out).copy_(src);
  }
  return out;
}

c10::IValue convert_return(const c10::IValue& v, const std::vector<CpuArg>& seen,
                           const c10::Device& dev, bool emulate64, std::vector<at::Tensor>& flat) {
  if (v.isTensor()) {
    at::Tensor t = to_device(v.toTensor(), seen, dev, emulate64);
    flat.push_back(t);
    return t;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) {
      out.push_back(to_device(t, seen, dev, emulate64));
      flat.push_back(out.get(out.size() - 1));
    }
    return out;
  }
  return v;
}

// A data-dependent output shape: the host waits for the device and reads the element count the
// program wrote (4 bytes over the host link) before it can size the output, as on the device.
void read_count(const c10::Device& device, const at::Tensor& count) {
  with_runtime([&](runtime::Runtime& r) {
    const sim::SimTime h0 = r.host_time();
    r.synchronize();
    r.copy_host(static_cast<uint32_t>(device.index()), current_stream(device.index()).id(),
                count.element_size(), false, r.hbm_address(count.data_ptr()), false);
    if (runtime::TraceSession* t = runtime::TraceSession::active())
      t->host("read output size (waits for the device)", "copy", h0, r.host_time());
    return 0;
  });
}

void record_native(const c10::OperatorName& name, bool at32) {
  sim::HostStageScope stage(stages::kOpTracking);
  if (!in_fallback()) report_native_kernel(name, at32);
}

std::string base_name(const c10::OperatorHandle& op) {
  return op.schema().name();
}

// Builds (or finds in the cache) and launches an op's programs. ISA mode (`functional`): the
// arguments the CPU kernel wrote are first restored from `snapshots`, the outputs it wrote are
// poisoned, so the values are the programs'.
void run_programs(const NativeOp& native, OpInvocation& inv, bool functional,
                  const std::vector<std::pair<at::Tensor, at::Tensor>>& snapshots,
                  const std::vector<at::Tensor>& poisoned) {
  if (native.shape_sync) inv.count = at::empty({1}, at::TensorOptions(inv.device).dtype(at::kInt));
  // Under the runtime lock throughout: a cached program stays put until it has run.
  with_runtime([&](runtime::Runtime& r) {
    inv.core_params = &r.device().params().core;
    inv.hbm_address = hbm_addresses(r);
    inv.grid = capture_mode() == CaptureMode::kOff ? r.device().params().logical_core_size : 1;
    std::optional<ProgramKey> key;
    const std::vector<device_model::Program>* cached = nullptr;
    std::vector<device_model::Program> built;
    {
      sim::HostStageScope stage(stages::kBuild);
      if (native.cacheable && !native.shape_sync && capture_mode() == CaptureMode::kOff &&
          r.program_cache().enabled()) {
        key = program_key(inv, functional);
        if (key) cached = r.program_cache().find(key->key, key->regions);
      }
      if (!cached) built = native.build(inv);
    }
    if (functional) {
      for (const auto& [dev_t, saved] : snapshots) {
        if (dev_t.sizes().equals(saved.sizes())) cpu_view(dev_t).copy_(saved);  // resized: no
      }
      for (const at::Tensor& t : poisoned) poison(t);
    }
    launch_programs(inv.device, cached ? *cached : built, functional, cached != nullptr);
    if (key && !cached) {
      sim::HostStageScope stage(stages::kBuild);
      r.program_cache().insert(key->key, std::move(built), std::move(key->regions));
    }
    return 0;
  });
}

}  // namespace

bool isa_mode() {
  return with_runtime([](runtime::Runtime& r) { return r.isa_mode(); });
}

void launch_programs(const c10::Device& device, const std::vector<device_model::Program>& programs,
                     bool functional, bool validated) {
  // Inside a compiled graph the graph's launch runs the work (aten/capture_mode.h).
  switch (capture_mode()) {
    case CaptureMode::kSkip:
      return;
    case CaptureMode::kCollect:
      collect_programs(programs);
      return;
    case CaptureMode::kOff:
      break;
  }
  with_runtime([&](runtime::Runtime& r) {
    const uint32_t dev = static_cast<uint32_t>(device.index());
    const int64_t stream = current_stream(device.index()).id();
    runtime::TraceSession* trace = runtime::TraceSession::active();
    for (const auto& p : programs) {
      const sim::SimTime h0 = r.charge_launch_overhead();
      device_model::RunResult res;
      {
        sim::HostStageScope stage(stages::kLaunch);
        res = r.launch(dev, stream, p, functional, validated);
      }
      sim::HostStageScope stage(stages::kTrace);
      if (trace) {
        trace->host("launch " + p.name, "launch", h0, r.host_time());
        for (const auto& c : res.cores) trace->kernel(c.core, c.start, c.end);
      }
      ActivityRecorder::get().on_launch(p.name, res);
    }
    return 0;
  });
}

void native_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const BackendKernelScope kernel_scope;
  sim::HostStageScope dispatch_stage(stages::kDispatch);
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const std::string name = base_name(op);

  // Complex (or otherwise unrepresentable) data takes the CPU fallback; zero-filling needs no
  // complex arithmetic, so a complex64 tensor is zeroed natively as its real (float32) view.
  std::optional<c10::Device> device;
  std::string unsupported;
  bool zeroing = name == "aten::zero_" || name == "aten::zero";
  if (name == "aten::fill_" || name == "aten::fill") {  // zero_ decomposes to fill_(0)
    const c10::IValue& v = (*stack)[stack->size() - nargs + 1];
    zeroing = v.isScalar() && v.toScalar().isComplex()
                  ? v.toScalar().toComplexDouble() == c10::complex<double>(0, 0)
                  : v.isScalar() && v.toScalar().toDouble() == 0.0;
  }
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (is_neuron(t) && !device) device = t.device();
      if (!device_dtype(t.scalar_type()) && !(zeroing && t.scalar_type() == at::kComplexFloat))
        unsupported = c10::toString(t.scalar_type());
    });
  }
  if (!unsupported.empty() || !device) {
    neuron_cpu_fallback(op, stack);
    return;
  }
  // As on CUDA: CPU tensors mix with device tensors only as 0-dim scalars or as advanced-indexing
  // indices; tensors on another NeuronCore never do. A CPU tensor is named as TorchNeuron names it
  // (its argument's position), then as CUDA does.
  for (size_t i = 0; i < nargs; ++i) {
    const bool indices = schema.arguments()[i].name() == "indices";
    int64_t element = -1;
    const bool list = (*stack)[stack->size() - nargs + i].isList();
    for_each_tensor((*stack)[stack->size() - nargs + i], [&](const at::Tensor& t) {
      ++element;
      if (!t.defined()) return;
      const bool ok = is_neuron(t) ? t.device() == *device : (t.dim() == 0 || indices);
      TORCH_CHECK(
          ok, is_neuron(t) ? "" : torchneuron_device_mismatch(schema, i, list ? element : -1, t),
          "Expected all tensors to be on the same device, but found at least two devices, ",
          *device, " and ", t.device(), "! (in ", name, ")");
    });
    // A CPU scalar written into the tensor (x[idx] = torch.tensor(9.0)) is uploaded first, as
    // CUDA does: the kernels read their values from device memory.
    c10::IValue& v = (*stack)[stack->size() - nargs + i];
    if (schema.arguments()[i].name() == "values" && v.isTensor() && v.toTensor().defined() &&
        !is_neuron(v.toTensor())) {
      v = v.toTensor().to(*device);
    }
  }
  const bool emulate64 = !exact_64bit();
  // A fused node of a compiled graph only computes its values (its graph's programs give the
  // time); its op appears in the trace as part of the graph's kernels.
  const CaptureMode capture = capture_mode();
  std::optional<OpScope> scope;
  if (capture == CaptureMode::kOff && runtime::TraceSession::active()) {
    sim::HostStageScope stage(stages::kTrace);
    scope.emplace(
        name, c10::ArrayRef<c10::IValue>(&*(stack->end() - static_cast<int64_t>(nargs)), nargs));
  }

  OpInvocation inv;
  inv.name = name;
  inv.schema = &schema;
  inv.device = *device;
  inv.args.assign(stack->end() - static_cast<int64_t>(nargs), stack->end());
  const NativeOp* native = find_native_op(name);
  TORCH_INTERNAL_ASSERT(native, "neuronsim: native op ", name, " has no timing");
  if (capture != CaptureMode::kSkip && native->supports && !native->supports(inv)) {
    neuron_cpu_fallback(op, stack);
    return;
  }

  // ISA mode: the programs compute the values into outputs that start poisoned (isa_outputs.h),
  // sized by the op's Meta kernel; the CPU kernel does not run. 64-bit data has no exact 32-bit
  // view in HBM (programs see low words), so those ops keep host values. Ops the Meta kernel
  // cannot size run the CPU kernel for the sizes; what it wrote is restored or poisoned before
  // the programs run.
  bool functional = capture == CaptureMode::kOff && isa_mode() && !native->isa_host_values;
  for (size_t i = 0; i < nargs && functional; ++i) {
    for_each_tensor(inv.args[i], [&](const at::Tensor& t) {
      // CPU 0-dim tensors (wrapped Python scalars) are read on the host as immediates. The low
      // word of an int64 is the value computed at 32 bits (emulate64); a double's is not.
      if (is_neuron(t) && is_64bit(t.scalar_type()) && (t.scalar_type() != at::kLong || !emulate64))
        functional = false;
    });
  }
  if (functional && !native->shape_sync && isa_outputs_from_meta(op, stack)) {
    for (const auto& r : torch::jit::last(*stack, schema.returns().size())) {
      for_each_tensor(r, [&](const at::Tensor& t) { inv.outputs.push_back(t); });
    }
    run_programs(*native, inv, true, {}, {});
    record_native(op.operator_name(), false);
    return;
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> snapshots;  // (device tensor, saved copy)
  for (size_t i = 0; i < nargs && functional; ++i) {
    const auto& alias = schema.arguments()[i].alias_info();
    const bool writes = (alias && alias->isWrite()) ||
                        std::find(native->writes.begin(), native->writes.end(),
                                  schema.arguments()[i].name()) != native->writes.end();
    if (writes) {  // a mutated tensor or tensor list (the _foreach_*_ ops)
      for_each_tensor(inv.args[i], [&](const at::Tensor& t) {
        if (is_neuron(t)) snapshots.emplace_back(t, cpu_view(t).clone());
      });
    }
  }
  std::vector<CpuArg> seen;
  bool any64 = false;
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) {
    (*stack)[i] = convert_arg((*stack)[i], emulate64, seen, &any64);
  }
  // Empty out= arguments: let the CPU kernel allocate, then resize the device tensor.
  for (size_t i = 0; i < nargs; ++i) {
    const auto& a = schema.arguments()[i];
    c10::IValue& v = (*stack)[stack->size() - nargs + i];
    if (a.is_out() && v.isTensor() && v.toTensor().numel() == 0) {
      at::Tensor fresh = at::empty({0}, v.toTensor().options());
      for (CpuArg& s : seen) {
        if (s.cpu.is_same(v.toTensor())) {
          s.cpu = fresh;
          s.copied = true;
        }
      }
      v = fresh;
    }
  }
  try {
    sim::HostStageScope stage(stages::kHostValues);
    if (native->host_values)
      native->host_values(op, stack);
    else
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const c10::NotImplementedError&) {
    // The CPU kernel lacks a dtype the device computes with (integer histc): the values come
    // from the fallback's widened host computation (which rethrows if it cannot help); the
    // time is still the native program's.
    stack->resize(stack->size() - nargs);
    stack->insert(stack->end(), inv.args.begin(), inv.args.end());
    run_on_host(op, stack);
    for (const auto& r : torch::jit::last(*stack, schema.returns().size())) {
      for_each_tensor(r, [&](const at::Tensor& t) { inv.outputs.push_back(t); });
    }
    if (capture == CaptureMode::kSkip) {
      record_native(op.operator_name(), false);
      return;
    }
    const auto programs = with_runtime([&](runtime::Runtime& r) {
      inv.core_params = &r.device().params().core;
      inv.hbm_address = hbm_addresses(r);
      inv.grid = capture == CaptureMode::kOff ? r.device().params().logical_core_size : 1;
      return native->build(inv);
    });
    launch_programs(*device, programs, false);
    record_native(op.operator_name(), false);
    return;
  }
  // Copied out= tensors: move the result into the (resized) device tensor.
  for (CpuArg& s : seen) {
    if (s.copied && !s.device.sizes().equals(s.cpu.sizes())) {
      s.device.resize_(s.cpu.sizes());
    }
  }
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    (*stack)[i] = convert_return((*stack)[i], seen, *device, emulate64, inv.outputs);
  }
  // In-place ops that return nothing (the _foreach_*_ family) write through their views; rounded
  // 64-bit copies still need writing back.
  if (nret == 0) {
    for (const CpuArg& s : seen) {
      if (s.copied) cpu_view(s.device).copy_(emulate64 ? round_to_32(s.cpu) : s.cpu);
    }
  }
  for (const at::Tensor& t : inv.outputs) {
    if (t.defined() && is_64bit(t.scalar_type())) functional = false;
  }
  if (capture == CaptureMode::kSkip) {
    record_native(op.operator_name(), any64 && emulate64);
    return;
  }
  std::vector<at::Tensor> poisoned;  // ISA mode: what the CPU kernel wrote that programs write
  if (functional) {
    for (const at::Tensor& t : inv.outputs) {
      bool is_arg = false;
      for (const CpuArg& a : seen) is_arg |= a.device.is_same(t);
      if (!is_arg) poisoned.push_back(t);
    }
    for (size_t i = 0; i < nargs; ++i) {
      if (schema.arguments()[i].is_out())
        for_each_tensor(inv.args[i], [&](const at::Tensor& t) {
          if (is_neuron(t) && !reads_out(schema, inv.args, t)) poisoned.push_back(t);
        });
    }
    OpTracker::get().isa_host(op.operator_name(),
                              native->shape_sync
                                  ? "outputs sized by the CPU kernel (data-dependent size)"
                                  : "outputs sized by the CPU kernel (no usable Meta kernel)");
  } else if (capture == CaptureMode::kOff && isa_mode()) {
    OpTracker::get().isa_host(op.operator_name(),
                              native->isa_host_values
                                  ? std::string("host values (") + native->isa_host_values + ")"
                                  : std::string("host values (64-bit data)"));
  }
  run_programs(*native, inv, functional, snapshots, poisoned);
  if (native->shape_sync) read_count(*device, inv.count);
  record_native(op.operator_name(), any64 && emulate64);
}

}  // namespace neuronsim::backend
