#include "aten/cpu_fallback.h"
#include "aten/kernel_report.h"
#include "host_stages.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "accelerator/context.h"
#include "accelerator/generator.h"
#include "aten/capture_mode.h"
#include "aten/device_tensor.h"
#include "aten/map_tensors.h"
#include "aten/native_ops.h"
#include "aten/op_observer.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {
namespace {

thread_local int t_fallback_depth = 0;

// Arguments whose CPU kernels write them although the schema does not say so, as the op table
// lists them (NativeOp::writes); PyTorch's own cpu_fallback loses these writes (nn.BatchNorm's
// running statistics in training mode).
bool unannotated_write(const std::string& op, const std::string& arg) {
  const NativeOp* native = find_native_op(op);
  return native &&
         std::find(native->writes.begin(), native->writes.end(), arg) != native->writes.end();
}

bool writes(const c10::FunctionSchema& schema, size_t i) {
  const auto& a = schema.arguments()[i];
  return (a.alias_info() && a.alias_info()->isWrite()) ||
         unannotated_write(schema.name(), a.name());
}

// Bytes [first, end) of its storage a tensor's elements occupy.
std::pair<int64_t, int64_t> byte_extent(const at::Tensor& t) {
  const int64_t es = static_cast<int64_t>(t.element_size());
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const int64_t first = t.storage_offset() * es;
  return {first, first + (last + 1) * es};
}

// Charges a host-link transfer of `bytes` at device memory `ptr` (waits for the device).
void charge_host_copy(c10::DeviceIndex dev, const void* ptr, uint64_t bytes, bool to_device) {
  if (bytes == 0) return;
  with_runtime([&](runtime::Runtime& r) {
    const auto c = r.copy_host(static_cast<uint32_t>(dev), current_stream(dev).id(), bytes,
                               to_device, r.hbm_address(ptr), false);
    if (runtime::TraceSession* t = runtime::TraceSession::active()) {
      t->kernel(r.physical_core(static_cast<uint32_t>(dev)), c.start, c.end);
    }
    return 0;
  });
}

// Host copies of an op's device tensors. Device tensors sharing storage get host tensors sharing
// one host buffer (the byte range they cover), with the same sizes, strides and offsets, so the
// CPU kernel sees the aliasing it would see on the CPU; tensors of a dtype the CPU kernel lacks
// are widened (copies of their own).
class HostStage {
 public:
  HostStage(const std::vector<c10::IValue>& args, c10::ScalarType narrow,
            std::optional<c10::ScalarType> wide)
      : narrow_(narrow), wide_(wide) {
    std::unordered_map<c10::StorageImpl*, std::pair<int64_t, int64_t>> ranges;
    for (const auto& v : args) {
      for_each_tensor(v, [&](const at::Tensor& t) {
        if (!is_neuron(t) || t.numel() == 0 || t._is_zerotensor()) return;
        const auto [a, b] = byte_extent(t);
        auto [it, fresh] = ranges.try_emplace(t.storage().unsafeGetStorageImpl(), a, b);
        if (!fresh) it->second = {std::min(it->second.first, a), std::max(it->second.second, b)};
      });
    }
    for (const auto& [impl, range] : ranges) {
      const int64_t lo = range.first / 16 * 16;  // every element size divides 16
      at::Tensor buf = at::empty({range.second - lo}, at::kByte);
      const char* src = static_cast<const char*>(impl->data()) + lo;
      std::memcpy(buf.data_ptr(), src, static_cast<size_t>(range.second - lo));
      charge_host_copy(impl->device().index(), src, static_cast<uint64_t>(range.second - lo),
                       false);
      buffers_.emplace(impl, Buffer{buf, lo});
    }
  }

  /// The host tensor of device tensor t (the same object for the same device tensor).
  at::Tensor host(const at::Tensor& t) {
    if (!is_neuron(t)) return t;
    auto it = hosts_.find(t.unsafeGetTensorImpl());
    if (it != hosts_.end()) return it->second;
    at::Tensor h;
    const auto cpu = t.options().device(at::kCPU);
    if (t.numel() == 0) {
      h = at::empty_strided(t.sizes(), t.strides(), cpu);
    } else if (t._is_zerotensor()) {  // no memory behind it
      h = at::zeros(t.sizes(), cpu);
    } else {
      const Buffer& b = buffers_.at(t.storage().unsafeGetStorageImpl());
      const int64_t es = static_cast<int64_t>(t.element_size());
      h = at::empty({0}, cpu);
      h.set_(b.data.storage(), (t.storage_offset() * es - b.lo) / es, t.sizes(), t.strides());
    }
    if (t.is_conj()) h = h._conj();
    if (t.is_neg()) h = h._neg_view();
    if (wide_ && t.scalar_type() == narrow_) h = h.to(*wide_);
    hosts_.emplace(t.unsafeGetTensorImpl(), h);
    originals_.push_back({t, h});
    return h;
  }

  /// Copies the host tensor of device tensor t back into t (resizing t when the CPU kernel
  /// resized its host tensor, as an out= argument may be).
  void write_back(const at::Tensor& t) {
    if (!is_neuron(t)) return;
    auto it = hosts_.find(t.unsafeGetTensorImpl());
    if (it == hosts_.end()) return;
    const at::Tensor& h = it->second;
    at::Tensor dev = t;
    if (!dev.sizes().equals(h.sizes())) dev.resize_(h.sizes());
    if (!dev.strides().equals(h.strides()) && h.is_non_overlapping_and_dense() &&
        dev.is_contiguous()) {
      dev.as_strided_(h.sizes(), h.strides());  // keep the CPU kernel's layout for its output
    }
    if (dev.numel() == 0) return;
    cpu_view(dev).copy_(h);
    const auto [a, b] = byte_extent(dev);
    charge_host_copy(dev.device().index(), dev.data_ptr(), static_cast<uint64_t>(b - a), true);
  }

  /// The device tensor a host result stands for: the argument itself when the CPU kernel
  /// returned its host tensor unchanged, else nullopt.
  std::optional<at::Tensor> argument_of(const at::Tensor& h) const {
    for (const auto& o : originals_) {
      if (o.host.is_same(h)) return o.device;
    }
    return std::nullopt;
  }

  bool widened(const at::Tensor& h) const { return wide_ && h.scalar_type() == *wide_; }
  c10::ScalarType narrow() const { return narrow_; }

 private:
  struct Buffer {
    at::Tensor data;
    int64_t lo;
  };
  struct Original {
    at::Tensor device, host;
  };
  c10::ScalarType narrow_;
  std::optional<c10::ScalarType> wide_;
  std::unordered_map<c10::StorageImpl*, Buffer> buffers_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> hosts_;
  std::vector<Original> originals_;
};

// A new device tensor holding a host result (same sizes and strides).
at::Tensor upload(at::Tensor h, const HostStage& stage, const c10::Device& dev) {
  if (!h.defined()) return h;
  if (auto arg = stage.argument_of(h)) return *arg;
  if (stage.widened(h)) h = h.to(stage.narrow());
  if (is_neuron(h)) return h;
  at::Tensor out = at::empty_strided(h.sizes(), h.strides(), h.options().device(dev));
  if (h.numel() == 0) return out;
  if (h._is_zerotensor()) {  // _efficientzerotensor: no host memory to copy, zeros on the device
    cpu_view(out).zero_();
    return out;
  }
  if (h.is_non_overlapping_and_dense() && !h.is_conj() && !h.is_neg()) {
    std::memcpy(out.data_ptr(), h.data_ptr(), h.numel() * h.element_size());
  } else {
    cpu_view(out).copy_(h);
  }
  charge_host_copy(dev.index(), out.data_ptr(), h.numel() * h.element_size(), true);
  return out;
}

// The dtype a "not implemented for 'Int'" error names, if the message has one.
std::optional<c10::ScalarType> missing_dtype(const std::string& what) {
  const std::string key = "not implemented for '";
  const auto p = what.find(key);
  if (p == std::string::npos) return std::nullopt;
  const auto q = what.find('\'', p + key.size());
  if (q == std::string::npos) return std::nullopt;
  const std::string name = what.substr(p + key.size(), q - p - key.size());
#define NEURONSIM_MATCH_DTYPE(_, st) \
  if (name == c10::toString(c10::ScalarType::st)) return c10::ScalarType::st;
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(NEURONSIM_MATCH_DTYPE)
  AT_FORALL_FLOAT8_TYPES(NEURONSIM_MATCH_DTYPE)
#undef NEURONSIM_MATCH_DTYPE
  return std::nullopt;
}

}  // namespace

bool in_fallback() {
  return t_fallback_depth > 0;
}

std::optional<c10::ScalarType> wider_host_dtype(c10::ScalarType t) {
  using c10::ScalarType;
  if (t == ScalarType::Bool || !device_dtype(t)) return std::nullopt;
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
      return ScalarType::Long;
    case ScalarType::Long:  // integer kernels missing altogether: exact below 2^53
    case ScalarType::Float:
      return ScalarType::Double;
    case ScalarType::Double:
      return std::nullopt;
    default:  // half, bfloat16, float8
      return ScalarType::Float;
  }
}

void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t base = stack->size() - nargs;
  const std::vector<c10::IValue> args(stack->begin() + static_cast<int64_t>(base), stack->end());

  // Where results go: the device of a Device argument (factories), else of the first device
  // tensor, else the current device.
  std::optional<c10::Device> target;
  for (const auto& v : args) {
    if (v.isDevice() && v.toDevice().is_privateuseone() && !target) target = v.toDevice();
  }
  for (const auto& v : args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (is_neuron(t) && !target) target = t.device();
    });
  }
  const c10::Device dev =
      target.value_or(c10::Device(c10::DeviceType::PrivateUse1, current_device()));

  // A CPU kernel lacking a dtype the device computes with runs again on widened copies
  // (float8 -> float32 -> float64, int32 -> int64 -> float64); the device arguments are
  // untouched until the run succeeds.
  c10::ScalarType narrow = c10::ScalarType::Undefined;
  std::optional<c10::ScalarType> wide;
  for (int attempt = 0;; ++attempt) {
    HostStage stage(args, narrow, wide);
    for (size_t i = 0; i < nargs; ++i) {
      c10::IValue v = map_tensors(args[i], [&](const at::Tensor& t) { return stage.host(t); });
      if (v.isDevice() && v.toDevice().is_privateuseone()) v = c10::Device(at::kCPU);
      // Random ops draw from the device generator's CPU generator: the CPU's stream.
      if (schema.arguments()[i].type()->str().find("Generator") != std::string::npos) {
        v = get_generator(v.isGenerator() ? std::optional(v.toGenerator()) : std::nullopt,
                          dev.index())
                ->host();
      }
      (*stack)[base + i] = std::move(v);
    }
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    } catch (const c10::NotImplementedError& e) {
      const auto missing = missing_dtype(e.what_without_backtrace());
      std::optional<c10::ScalarType> next;
      if (missing && attempt == 0) {
        narrow = *missing;
        next = wider_host_dtype(*missing);
      } else if (missing && wide && *missing == *wide) {
        next = wider_host_dtype(*wide);
      }
      stack->resize(base);
      stack->insert(stack->end(), args.begin(), args.end());
      if (!next || attempt >= 2) throw;
      wide = next;
      continue;
    }
    // Copy back exactly what the op writes.
    for (size_t i = 0; i < nargs; ++i) {
      if (writes(schema, i))
        for_each_tensor(args[i], [&](const at::Tensor& t) { stage.write_back(t); });
    }
    // Results: a written argument returns as itself, anything else becomes a device tensor.
    const auto& rets = schema.returns();
    const size_t rbase = stack->size() - rets.size();
    for (size_t j = 0; j < rets.size(); ++j) {
      c10::IValue& r = (*stack)[rbase + j];
      const c10::AliasInfo* alias = rets[j].alias_info();
      if (alias && alias->isWrite()) {
        for (size_t i = 0; i < nargs; ++i) {
          const c10::AliasInfo* a = schema.arguments()[i].alias_info();
          if (a && *a == *alias) r = args[i];
        }
        continue;
      }
      if (r.isTensor()) {
        r = upload(r.toTensor(), stage, dev);
      } else if (r.isTensorList()) {
        c10::List<at::Tensor> out;
        for (const at::Tensor& t : r.toTensorList()) out.push_back(upload(t, stage, dev));
        r = out;
      }
    }
    return;
  }
}

void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const BackendKernelScope kernel_scope;
  sim::HostStageScope stage(stages::kFallback);
  const std::string name = op.schema().name();
  // An op PyTorch implements only for accelerators (CUDA-only kernels such as nn.SyncBatchNorm's
  // batch_norm_stats) has nothing to fall back to: say so, instead of the dispatcher's "Could
  // not run '...' with arguments from the 'CPU' backend" about tensors the user put on neuron.
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU),
      OpTracker::full_name(op.operator_name()),
      " is not implemented for the neuron device: neuronsim has no kernel for it, and the CPU "
      "fallback cannot run it because PyTorch has no CPU kernel for it (PyTorch implements it "
      "only for accelerators such as CUDA).");
  const size_t nargs = op.schema().arguments().size();
  std::string reason;
  for (const auto& v : torch::jit::last(*stack, nargs)) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (t.defined() && t.is_complex()) reason = " for complex tensors";
    });
  }
  // A fused node of a compiled graph computes its values here without a device kernel of its
  // own; the graph's fused programs give its time.
  const bool fused = capture_mode() == CaptureMode::kSkip;
  if (!in_fallback() && !fused) {
    report_fallback_kernel(OpTracker::full_name(op.operator_name()), reason);
  }
  std::optional<OpScope> scope;
  if (!fused) {
    scope.emplace(
        name + " (CPU fallback)",
        c10::ArrayRef<c10::IValue>(&*(stack->end() - static_cast<int64_t>(nargs)), nargs));
  }
  struct Depth {
    Depth() { ++t_fallback_depth; }
    ~Depth() { --t_fallback_depth; }
  } depth;
  // The data crosses the host link (charged as DMA by the staging); the CPU work costs host time.
  if (runtime::Runtime::initialized() && !fused) {
    with_runtime([&](runtime::Runtime& r) {
      r.synchronize();
      const sim::SimTime h0 = r.charge_cpu_fallback();
      if (runtime::TraceSession* t = runtime::TraceSession::active()) {
        t->host("CPU fallback " + name, "fallback", h0, r.host_time());
      }
      return 0;
    });
  }
  run_on_host(op, stack);
}

}  // namespace neuronsim::backend
