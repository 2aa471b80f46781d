#include "aten/host_kernel_call.h"
#include "host_stages.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "aten/device_tensor.h"
#include "aten/map_tensors.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {

namespace {

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

}  // namespace

bool emulate_64bit() {
  // Read once (getenv scans the environment; this is asked on every op).
  static const bool exact = [] {
    const char* v = std::getenv("NEURON_SIM_EXACT_64BIT");
    return v && std::strcmp(v, "1") == 0;
  }();
  return !exact;
}

bool run_host_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const NativeOp& native, OpInvocation& inv, bool* at32) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const bool emulate64 = emulate_64bit();
  std::vector<CpuArg> seen;
  bool any64 = false;
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) {
    (*stack)[i] = map_tensors(
        (*stack)[i], [&](const at::Tensor& t) { return to_cpu(t, emulate64, seen, &any64); });
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
    if (native.host_values)
      native.host_values(op, stack);
    else
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const c10::NotImplementedError&) {
    stack->resize(stack->size() - nargs);
    stack->insert(stack->end(), inv.args.begin(), inv.args.end());
    return false;
  }
  // Copied out= tensors: move the result into the (resized) device tensor.
  for (CpuArg& s : seen) {
    if (s.copied && !s.device.sizes().equals(s.cpu.sizes())) {
      s.device.resize_(s.cpu.sizes());
    }
  }
  const size_t nret = schema.returns().size();
  for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
    (*stack)[i] = convert_return((*stack)[i], seen, inv.device, emulate64, inv.outputs);
  }
  // In-place ops that return nothing (the _foreach_*_ family) write through their views; rounded
  // 64-bit copies still need writing back.
  if (nret == 0) {
    for (const CpuArg& s : seen) {
      if (s.copied) cpu_view(s.device).copy_(emulate64 ? round_to_32(s.cpu) : s.cpu);
    }
  }
  *at32 = any64 && emulate64;
  return true;
}

}  // namespace neuronsim::backend
