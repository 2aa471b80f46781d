// The ops every PrivateUse1 device needs (PYTORCH-BACKEND.md 2.1): factories, metadata-only
// views, storage rebinding, copies across the host link and .item(). Copies cost simulated time
// through the DMA model; views never copy.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "accelerator/context.h"
#include "accelerator/hooks.h"
#include "aten/capture_mode.h"
#include "aten/device_tensor.h"
#include "aten/kernel_report.h"
#include "aten/native_boxed.h"
#include "aten/op_observer.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "aten/torch_op_call.h"
#include "neuronsim/kernels/ops/device_copy.h"
#include "neuronsim/runtime/trace_session.h"

namespace neuronsim::backend {
namespace {

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  const auto dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron tensors must be strided");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1),
                                   kNeuronKeys, c10::dtype_or_default(dtype), memory_format);
}

// Forward-mode AD's zero tangents: no storage (a null data pointer on the device), as on CUDA;
// the ZeroTensor key materialises them (at::zeros on the device) for ops that read them.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> layout,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  c10::Device dev = c10::device_or_default(device);
  if (!dev.has_index()) {
    dev.set_index(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index());
  }
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron tensors must be strided");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  at::native::ZeroTensorAllocator allocator(dev);
  return at::detail::empty_generic(size, &allocator,
                                   kNeuronKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor),
                                   c10::dtype_or_default(dtype), std::nullopt);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  const auto dev = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron tensors must be strided");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  const c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride,
                                           c10::GetAllocator(c10::DeviceType::PrivateUse1),
                                           kNeuronKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<at::MemoryFormat> memory_format) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

uint64_t payload_bytes(const at::Tensor& t) {
  return t.numel() * t.element_size();
}

// All copies that involve a neuron tensor land here (copy_, .to, .cpu(), the fallback).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const BackendKernelScope kernel_scope;
  TORCH_CHECK(self.defined() && dst.defined(), "copy between undefined tensors");
  const bool src_dev = self.device().is_privateuseone(), dst_dev = dst.device().is_privateuseone();
  if (self.numel() == 0) return dst;
  OpScope scope("aten::copy_", {dst, self});
  if (src_dev && dst_dev) {
    cpu_view(dst).copy_(cpu_view(self));
    const auto src_arg = tensor_arg(self, {}), dst_arg = tensor_arg(dst, {});
    if (!kernels::ops::device_copy_supported(src_arg, dst_arg)) return dst;
    const auto programs = with_runtime([&](runtime::Runtime& r) {
      const auto hbm = hbm_addresses(r);
      // A logical core of several physical cores copies on all of them (kernels/spmd.h), except
      // inside a compiled graph, whose linker joins single-core programs.
      const uint32_t grid =
          capture_mode() == CaptureMode::kOff ? r.device().params().logical_core_size : 1;
      return kernels::ops::device_copy_programs(tensor_arg(self, hbm), tensor_arg(dst, hbm),
                                                describe_bytes(self, hbm), describe_bytes(dst, hbm),
                                                r.device().params().core, grid);
    });
    launch_programs(
        dst.device(), programs,
        isa_mode() && self.scalar_type() != at::kDouble && dst.scalar_type() != at::kDouble);
    if (!in_fallback()) {
      static const c10::OperatorName kCopy("aten::copy_", "");
      report_native_kernel(kCopy, false);
    }
    return dst;
  }
  if (dst_dev) {  // host -> device
    cpu_view(dst).copy_(self);
    const bool async = non_blocking && is_pinned(self.storage());
    with_runtime([&](runtime::Runtime& r) {
      const sim::SimTime h0 = r.host_time();
      const auto c = r.copy_host(static_cast<uint32_t>(dst.device().index()),
                                 current_stream(dst.device().index()).id(), payload_bytes(dst),
                                 true, r.hbm_address(dst.data_ptr()), async);
      if (runtime::TraceSession* t = runtime::TraceSession::active()) {
        t->kernel(r.physical_core(static_cast<uint32_t>(dst.device().index())), c.start, c.end);
        if (r.host_time() > h0)
          t->host("copy host to device", "copy", h0, r.host_time(),
                  {{"bytes", payload_bytes(dst)}});
      }
      return 0;
    });
    return dst;
  }
  // device -> host: waits for the device, then the copy.
  with_runtime([&](runtime::Runtime& r) {
    const bool async = non_blocking && is_pinned(dst.storage());
    const sim::SimTime h0 = r.host_time();
    if (!async) r.synchronize();
    const auto c = r.copy_host(static_cast<uint32_t>(self.device().index()),
                               current_stream(self.device().index()).id(), payload_bytes(self),
                               false, r.hbm_address(self.data_ptr()), async);
    if (runtime::TraceSession* t = runtime::TraceSession::active()) {
      t->kernel(r.physical_core(static_cast<uint32_t>(self.device().index())), c.start, c.end);
      if (r.host_time() > h0)
        t->host("copy device to host (waits for the device)", "copy", h0, r.host_time(),
                {{"bytes", payload_bytes(self)}});
    }
    return 0;
  });
  dst.copy_(cpu_view(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  const BackendKernelScope kernel_scope;
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  const BackendKernelScope kernel_scope;
  with_runtime([&](runtime::Runtime& r) {
    r.synchronize();
    r.copy_host(static_cast<uint32_t>(self.device().index()),
                current_stream(self.device().index()).id(), self.element_size(), false,
                r.hbm_address(self.data_ptr()), false);
    return 0;
  });
  return at::_local_scalar_dense(cpu_view(self));
}

// torch._assert_async: the device checks its one value where it lies and traps if it is zero
// (no host synchronisation, as CUDA's device-side assert); here the CPU kernel reads it in place
// and raises the CPU's error.
void assert_async(const at::Tensor& self) {
  const BackendKernelScope kernel_scope;
  at::_assert_async(cpu_view(self));
}

void assert_async_msg(const at::Tensor& self, c10::string_view msg) {
  const BackendKernelScope kernel_scope;
  at::_assert_async(cpu_view(self), msg);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  return at::native::set_(self, source);
}

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage storage, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::cpu::set__symint(self, storage, offset, size, stride);
}

at::Tensor& set_empty(at::Tensor& self) {
  return at::cpu::set_(self);
}

at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}
at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// Module.to("neuron") keeps its Parameter objects (and so tied weights) when a CPU or neuron
// tensor may take the other's data in place, as CUDA tensors may (param.data = ...).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || t.device().is_privateuseone());
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self) && dense(from));
}

void record_stream(at::Tensor&, c10::Stream) {
  // Work completes in launch order on the simulated clock (see device_allocator.cpp).
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Factories.
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  // Metadata-only views.
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("view_as_real", view_as_real);
  m.impl("view_as_complex", view_as_complex);
  m.impl("unfold", unfold);
  // Copies across the host link and .item().
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_assert_async", assert_async);
  m.impl("_assert_async.msg", assert_async_msg);
  // Storage: resizing and rebinding.
  m.impl("resize_", resize);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_", set_empty);
  // Streams, and Module.to keeping its Parameters.
  m.impl("record_stream", record_stream);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// Copies handle the conjugate and negative bits themselves (cpu_view keeps them); without these
// fallthroughs the Conjugate fallback would resolve through clone -> copy_ -> _copy_from forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

}  // namespace neuronsim::backend
