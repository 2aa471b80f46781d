// native_group_norm and native_group_norm_backward: the kernel library's group norm (rows (n, g)
// on partitions). Contiguous and channels-last data (each tensor in either) of at most one
// partition tile of groups run native; other layouts and shapes take the CPU fallback.
#include <optional>

#include "neuronsim/kernels/group_norm.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

GroupNormShape shape_of(const OpCall& call) {
  GroupNormShape s;
  s.N = call.integer("N", 0);
  s.C = call.integer("C", 0);
  s.HxW = call.integer("HxW", 0);
  s.groups = call.integer("group", 1);
  return s;
}

std::optional<TensorDesc> optional_arg(const OpCall& call, const char* name) {
  if (!call.has(name)) return std::nullopt;
  return call.tensor(name).desc;
}

std::optional<TensorDesc> optional_output(const OpCall& call, size_t i) {
  if (i >= call.num_outputs()) return std::nullopt;
  const TensorArg t = call.output(i);
  if (!t.defined || t.numel() == 0) return std::nullopt;
  return t.desc;
}

// Contiguous, or channels-last ([N, HxW, C] in memory), in device elements (as the kernel reads
// the layout).
bool dense(const TensorArg& t) {
  return t.is_contiguous() || group_norm_channels_last(t.desc.sizes, t.desc.strides);
}

// Floating tensors; the data tensors (and a defined data output) contiguous or channels-last
// with N * C * HxW elements; a shape the kernels take.
bool supported(const OpCall& call, std::initializer_list<const char*> data) {
  const GroupNormShape s = shape_of(call);
  for (size_t i = 0; i < call.num_args(); ++i) {
    const TensorArg t = call.tensor(i);
    if (t.defined && !t.is_floating()) return false;
  }
  for (const char* name : data) {
    const TensorArg t = call.tensor(name);
    if (!dense(t) || static_cast<int64_t>(t.numel()) != s.N * s.C * s.HxW) return false;
  }
  if (call.num_outputs() > 0) {
    const TensorArg o = call.output(0);
    if (o.defined && o.numel() > 0 && !dense(o)) return false;
  }
  for (const char* name : {"weight", "bias"}) {
    if (call.kind(name) != ArgKind::kTensor) continue;
    const TensorArg t = call.tensor(name);
    if (t.dim() != 1 || t.size(0) != s.C) return false;
  }
  return group_norm_fits(s, call.core());
}

}  // namespace

std::vector<OpRule> group_norm_rules() {
  OpRule fwd;
  fwd.name = "aten::native_group_norm";
  fwd.build = [](const OpCall& call) {
    GroupNormIo io;
    io.in = call.tensor("input").desc;
    io.out = call.output(0).desc;
    io.weight = optional_arg(call, "weight");
    io.bias = optional_arg(call, "bias");
    io.mean = optional_output(call, 1);
    io.rstd = optional_output(call, 2);
    io.shape = shape_of(call);
    io.eps = static_cast<float>(call.number("eps", 1e-5));
    return Programs{build_group_norm(call.name(), io, call.core())};
  };
  fwd.supports = [](const OpCall& call) { return supported(call, {"input"}); };

  OpRule bwd;
  bwd.name = "aten::native_group_norm_backward";
  bwd.build = [](const OpCall& call) {
    GroupNormBackwardIo io;
    io.grad_out = call.tensor("grad_out").desc;
    io.in = call.tensor("input").desc;
    io.mean = call.tensor("mean").desc;
    io.rstd = call.tensor("rstd").desc;
    io.weight = optional_arg(call, "weight");
    io.grad_in = optional_output(call, 0);
    io.grad_weight = optional_output(call, 1);
    io.grad_bias = optional_output(call, 2);
    io.shape = shape_of(call);
    return Programs{build_group_norm_backward(call.name(), io, call.core())};
  };
  bwd.supports = [](const OpCall& call) {
    const TensorArg m = call.tensor("mean"), r = call.tensor("rstd");
    const GroupNormShape s = shape_of(call);
    const auto stats = static_cast<uint64_t>(s.N * s.groups);
    if (!m.is_contiguous() || !r.is_contiguous() || m.numel() != stats || r.numel() != stats)
      return false;
    return supported(call, {"grad_out", "input"});
  };
  return {fwd, bwd};
}

}  // namespace neuronsim::kernels::ops
