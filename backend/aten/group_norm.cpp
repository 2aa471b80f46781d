// native_group_norm and native_group_norm_backward: the kernel library's group norm (rows (n, g)
// on partitions). Contiguous inputs of at most one partition tile of groups run native; other
// layouts (channels_last) and shapes take the CPU fallback.
#include <ATen/ATen.h>

#include "accelerator/context.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/group_norm.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

kernels::GroupNormShape shape_of(const OpInvocation& inv) {
  kernels::GroupNormShape s;
  s.N = inv.arg("N").toInt();
  s.C = inv.arg("C").toInt();
  s.HxW = inv.arg("HxW").toInt();
  s.groups = inv.arg("group").toInt();
  return s;
}

std::optional<kernels::TensorDesc> opt(const OpInvocation& inv, const char* name) {
  const c10::IValue& v = inv.arg(name);
  if (!v.isTensor() || !v.toTensor().defined()) return std::nullopt;
  return inv.describe(v.toTensor());
}

std::optional<kernels::TensorDesc> output(const OpInvocation& inv, size_t i) {
  if (i >= inv.outputs.size() || !inv.outputs[i].defined() || inv.outputs[i].numel() == 0)
    return std::nullopt;
  return inv.describe(inv.outputs[i]);
}

// Floating tensors; the data tensors contiguous with N * C * HxW elements; a shape the kernels
// take.
bool supports(const OpInvocation& inv, std::initializer_list<const char*> data) {
  const kernels::GroupNormShape s = shape_of(inv);
  for (const c10::IValue& v : inv.args) {
    if (v.isTensor() && v.toTensor().defined() && !c10::isFloatingType(v.toTensor().scalar_type()))
      return false;
  }
  for (const char* name : data) {
    const at::Tensor t = inv.arg(name).toTensor();
    if (!t.is_contiguous() || t.numel() != s.N * s.C * s.HxW) return false;
  }
  for (const char* name : {"weight", "bias"}) {
    if (!inv.has_arg(name) || !inv.arg(name).isTensor()) continue;
    const at::Tensor t = inv.arg(name).toTensor();
    if (t.defined() && (t.dim() != 1 || t.size(0) != s.C)) return false;
  }
  return with_runtime(
      [&](runtime::Runtime& r) { return kernels::group_norm_fits(s, r.device().params().core); });
}

Programs forward(const OpInvocation& inv) {
  kernels::GroupNormIo io;
  io.in = inv.describe(inv.arg("input").toTensor());
  io.out = inv.describe(inv.outputs.at(0));
  io.weight = opt(inv, "weight");
  io.bias = opt(inv, "bias");
  io.mean = output(inv, 1);
  io.rstd = output(inv, 2);
  io.shape = shape_of(inv);
  io.eps = static_cast<float>(inv.scalar("eps", 1e-5));
  return Programs{kernels::build_group_norm(inv.name, io, inv.core())};
}

Programs backward(const OpInvocation& inv) {
  kernels::GroupNormBackwardIo io;
  io.grad_out = inv.describe(inv.arg("grad_out").toTensor());
  io.in = inv.describe(inv.arg("input").toTensor());
  io.mean = inv.describe(inv.arg("mean").toTensor());
  io.rstd = inv.describe(inv.arg("rstd").toTensor());
  io.weight = opt(inv, "weight");
  io.grad_in = output(inv, 0);
  io.grad_weight = output(inv, 1);
  io.grad_bias = output(inv, 2);
  io.shape = shape_of(inv);
  return Programs{kernels::build_group_norm_backward(inv.name, io, inv.core())};
}

}  // namespace

NativeOpTable group_norm_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::native_group_norm", forward,
                 [](const OpInvocation& inv) { return supports(inv, {"input"}); }});
  ops.push_back({"aten::native_group_norm_backward", backward, [](const OpInvocation& inv) {
                   const at::Tensor m = inv.arg("mean").toTensor(), r = inv.arg("rstd").toTensor();
                   const kernels::GroupNormShape s = shape_of(inv);
                   if (!m.is_contiguous() || !r.is_contiguous() || m.numel() != s.N * s.groups ||
                       r.numel() != s.N * s.groups)
                     return false;
                   return supports(inv, {"grad_out", "input"});
                 }});
  return ops;
}

}  // namespace neuronsim::backend
