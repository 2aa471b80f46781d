// Batch norm (native_batch_norm, _native_batch_norm_legit, _batch_norm_with_update) and its
// backward (native_batch_norm_backward, batch_norm_backward): the kernel library's batch norm,
// channels on partitions. native_batch_norm updates the running statistics without saying so in
// its schema, so its table entry names them as written arguments.
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/batch_norm.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// A tensor argument that is present and not empty.
std::optional<kernels::TensorDesc> opt(const OpInvocation& inv, const std::string& name) {
  if (!inv.has_arg(name) || !inv.arg(name).isTensor()) return std::nullopt;
  const at::Tensor t = inv.arg(name).toTensor();
  if (!t.defined() || t.numel() == 0) return std::nullopt;
  return inv.describe(t);
}

std::optional<kernels::TensorDesc> output(const OpInvocation& inv, size_t i) {
  if (i >= inv.outputs.size() || !inv.outputs[i].defined() || inv.outputs[i].numel() == 0)
    return std::nullopt;
  return inv.describe(inv.outputs[i]);
}

bool training(const OpInvocation& inv, const char* arg) {
  return inv.has_arg(arg) ? inv.arg(arg).toBool() : true;  // _batch_norm_with_update: always
}

// Floating data (argument `data`) of 2 to 5 dims, not empty; every tensor argument floating.
bool supported_data(const OpInvocation& inv, size_t data) {
  const at::Tensor x = inv.tensor(data);
  if (!x.defined() || x.dim() < 2 || x.dim() > 5 || x.numel() == 0) return false;
  for (const c10::IValue& v : inv.args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().numel() > 0 &&
        !c10::isFloatingType(v.toTensor().scalar_type()))
      return false;
  }
  return true;
}

bool supported(const OpInvocation& inv) {
  return supported_data(inv, 0);
}

Programs forward(const OpInvocation& inv) {
  kernels::BatchNormIo io;
  io.in = inv.describe(inv.tensor(0));
  io.out = inv.describe(inv.outputs.at(0));
  io.weight = opt(inv, "weight");
  io.bias = opt(inv, "bias");
  io.running_mean = opt(inv, "running_mean");
  io.running_var = opt(inv, "running_var");
  io.training = training(inv, "training");
  if (io.training) {
    io.save_mean = output(inv, 1);
    io.save_invstd = output(inv, 2);
  }
  io.momentum = static_cast<float>(inv.scalar("momentum", 0.1));
  io.eps = static_cast<float>(inv.scalar("eps", 1e-5));
  return Programs{kernels::build_batch_norm(inv.name, io, inv.core())};
}

// native_batch_norm_backward (train, save_invstd) and batch_norm_backward (update, save_var).
Programs backward(const OpInvocation& inv) {
  kernels::BatchNormBackwardIo io;
  io.grad_out = inv.describe(inv.tensor(0));
  io.in = inv.describe(inv.tensor(1));
  io.weight = opt(inv, "weight");
  io.running_mean = opt(inv, "running_mean");
  io.running_var = opt(inv, "running_var");
  io.save_mean = opt(inv, "save_mean");
  io.save_invstd = opt(inv, inv.has_arg("save_invstd") ? "save_invstd" : "save_var");
  io.training = inv.arg(inv.has_arg("train") ? "train" : "update").toBool();
  io.eps = static_cast<float>(inv.scalar("eps", 1e-5));
  io.grad_in = output(inv, 0);
  io.grad_weight = output(inv, 1);
  io.grad_bias = output(inv, 2);
  return Programs{kernels::build_batch_norm_backward(inv.name, io, inv.core())};
}

bool backward_supported(const OpInvocation& inv) {
  const at::Tensor g = inv.tensor(0), x = inv.tensor(1);
  if (!g.defined() || !x.defined() || !g.sizes().equals(x.sizes())) return false;
  const bool train = inv.arg(inv.has_arg("train") ? "train" : "update").toBool();
  const char* mean = train ? "save_mean" : "running_mean";
  const char* stat =
      train ? (inv.has_arg("save_invstd") ? "save_invstd" : "save_var") : "running_var";
  for (const char* n : {mean, stat}) {
    if (!inv.arg(n).isTensor() || !inv.arg(n).toTensor().defined()) return false;
  }
  return supported_data(inv, 1);
}

}  // namespace

NativeOpTable batch_norm_ops() {
  NativeOpTable ops;
  NativeOp with_running_stats{"aten::native_batch_norm", forward, supported};
  with_running_stats.writes = {"running_mean", "running_var"};
  ops.push_back(with_running_stats);
  ops.push_back({"aten::_native_batch_norm_legit", forward, supported});
  ops.push_back({"aten::_batch_norm_with_update", forward, supported});
  ops.push_back({"aten::native_batch_norm_backward", backward, backward_supported});
  ops.push_back({"aten::batch_norm_backward", backward, backward_supported});
  return ops;
}

}  // namespace neuronsim::backend
