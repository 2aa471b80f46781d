// Batch norm (native_batch_norm, _native_batch_norm_legit, _batch_norm_with_update) and its
// backward (native_batch_norm_backward, batch_norm_backward): the kernel library's batch norm,
// channels on partitions. native_batch_norm updates the running statistics without saying so in
// its schema, so its rule names them as written arguments. nn.SyncBatchNorm's ops (stats,
// gather, elemt, backward reduce and elemt) have programs per phase; their host values are the
// backend's (CUDA-only ops: backend/aten/sync_batch_norm.cpp).
#include <optional>

#include "neuronsim/kernels/batch_norm.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

// A tensor argument that is present and not empty.
std::optional<TensorDesc> opt(const OpCall& call, const std::string& name) {
  if (call.kind(name) != ArgKind::kTensor) return std::nullopt;
  const TensorArg t = call.tensor(name);
  if (t.numel() == 0) return std::nullopt;
  return t.desc;
}

std::optional<TensorDesc> described(const TensorArg& t) {
  if (!t.defined || t.numel() == 0) return std::nullopt;
  return t.desc;
}

std::optional<TensorDesc> output(const OpCall& call, size_t i) {
  if (i >= call.num_outputs()) return std::nullopt;
  return described(call.output(i));
}

bool training(const OpCall& call, const char* arg) {
  return call.in_schema(arg) ? call.boolean(arg, true) : true;  // _batch_norm_with_update
}

// Floating data (argument `data`) of 2 to 5 dims, not empty; every tensor argument floating.
bool supported_data(const OpCall& call, size_t data) {
  const TensorArg x = call.tensor(data);
  if (!x.defined || x.dim() < 2 || x.dim() > 5 || x.numel() == 0) return false;
  for (size_t i = 0; i < call.num_args(); ++i) {
    const TensorArg t = call.tensor(i);
    if (t.defined && t.numel() > 0 && !t.is_floating()) return false;
  }
  return true;
}

Programs forward(const OpCall& call) {
  BatchNormIo io;
  io.in = call.tensor(0).desc;
  io.out = call.output(0).desc;
  io.weight = opt(call, "weight");
  io.bias = opt(call, "bias");
  io.running_mean = opt(call, "running_mean");
  io.running_var = opt(call, "running_var");
  io.training = training(call, "training");
  if (io.training) {
    io.save_mean = output(call, 1);
    io.save_invstd = output(call, 2);
  }
  io.momentum = static_cast<float>(call.number("momentum", 0.1));
  io.eps = static_cast<float>(call.number("eps", 1e-5));
  return {build_batch_norm(call.name(), io, call.core())};
}

// native_batch_norm_backward (train, save_invstd) and batch_norm_backward (update, save_var).
const char* train_arg(const OpCall& call) {
  return call.in_schema("train") ? "train" : "update";
}
const char* invstd_arg(const OpCall& call) {
  return call.in_schema("save_invstd") ? "save_invstd" : "save_var";
}

Programs backward(const OpCall& call) {
  BatchNormBackwardIo io;
  io.grad_out = call.tensor(0).desc;
  io.in = call.tensor(1).desc;
  io.weight = opt(call, "weight");
  io.running_mean = opt(call, "running_mean");
  io.running_var = opt(call, "running_var");
  io.save_mean = opt(call, "save_mean");
  io.save_invstd = opt(call, invstd_arg(call));
  io.training = call.boolean(train_arg(call), true);
  io.eps = static_cast<float>(call.number("eps", 1e-5));
  io.grad_in = output(call, 0);
  io.grad_weight = output(call, 1);
  io.grad_bias = output(call, 2);
  return {build_batch_norm_backward(call.name(), io, call.core())};
}

bool backward_supported(const OpCall& call) {
  const TensorArg g = call.tensor(0), x = call.tensor(1);
  if (!g.defined || !x.defined || g.sizes() != x.sizes()) return false;
  const bool train = call.boolean(train_arg(call), true);
  const char* mean = train ? "save_mean" : "running_mean";
  const char* stat = train ? invstd_arg(call) : "running_var";
  for (const char* n : {mean, stat}) {
    if (call.kind(n) != ArgKind::kTensor) return false;
  }
  return supported_data(call, 1);
}

Programs stats_program(const OpCall& call) {
  BatchNormStatsIo io{call.tensor(0).desc, call.output(0).desc, call.output(1).desc,
                      static_cast<float>(call.number("eps", 1e-5))};
  return {build_batch_norm_stats(call.name(), io, call.core())};
}

Programs gather_stats_program(const OpCall& call) {
  BatchNormGatherStatsIo io;
  io.mean_all = call.tensor(1).desc;
  io.invstd_all = call.tensor(2).desc;
  io.counts = call.tensor("counts").desc;
  io.mean = call.output(0).desc;
  io.invstd = call.output(1).desc;
  io.running_mean = opt(call, "running_mean");
  io.running_var = opt(call, "running_var");
  io.momentum = static_cast<float>(call.number("momentum", 0.1));
  io.eps = static_cast<float>(call.number("eps", 1e-5));
  if (io.mean_all.sizes.at(0) == 0) return {};  // no rank had data
  return {build_batch_norm_gather_stats(call.name(), io, call.core())};
}

Programs elemt_program(const OpCall& call) {
  BatchNormElemtIo io{call.tensor(0).desc,        call.output(0).desc, call.tensor("mean").desc,
                      call.tensor("invstd").desc, opt(call, "weight"), opt(call, "bias")};
  if (call.output(0).numel() == 0) return {};
  return {build_batch_norm_elemt(call.name(), io, call.core())};
}

Programs backward_reduce_program(const OpCall& call) {
  if (call.tensor(1).numel() == 0) return {};
  BatchNormBackwardReduceIo io{call.tensor(0).desc, call.tensor(1).desc, call.tensor(2).desc,
                               call.tensor(3).desc};
  io.sum_dy = described(call.output(0));
  io.sum_dy_xmu = described(call.output(1));
  io.grad_weight = described(call.output(2));
  io.grad_bias = described(call.output(3));
  return {build_batch_norm_backward_reduce(call.name(), io, call.core())};
}

Programs backward_elemt_program(const OpCall& call) {
  if (call.output(0).numel() == 0) return {};
  BatchNormBackwardElemtIo io{call.tensor(0).desc,        call.tensor(1).desc,
                              call.tensor(2).desc,        call.tensor(3).desc,
                              call.tensor("sum_dy").desc, call.tensor("sum_dy_xmu").desc,
                              call.output(0).desc,        opt(call, "weight")};
  // N (every rank's elements per channel) is an immediate of the program, read from the
  // per-rank counts in device memory (it scales values only, not the time).
  double n = 0;
  for (double c : read_doubles(call.tensor("count"))) n += c;
  io.count = static_cast<float>(n);
  return {build_batch_norm_backward_elemt(call.name(), io, call.core())};
}

bool supported(const OpCall& call) {
  return supported_data(call, 0);
}

}  // namespace

std::vector<OpRule> batch_norm_rules() {
  std::vector<OpRule> ops;
  OpRule with_running_stats = make_rule("aten::native_batch_norm", forward, supported);
  with_running_stats.writes = {"running_mean", "running_var"};
  ops.push_back(with_running_stats);
  ops.push_back(make_rule("aten::_native_batch_norm_legit", forward, supported));
  ops.push_back(make_rule("aten::_batch_norm_with_update", forward, supported));
  ops.push_back(make_rule("aten::native_batch_norm_backward", backward, backward_supported));
  ops.push_back(make_rule("aten::batch_norm_backward", backward, backward_supported));
  for (OpRule& r : ops) r.cacheable = true;
  // nn.SyncBatchNorm's phases (built per call: elemt's backward reads the counts); CUDA-only
  // ops, whose host values the backend computes.
  const size_t sync_first = ops.size();
  ops.push_back(make_rule("aten::batch_norm_stats", stats_program));
  OpRule gather = make_rule("aten::batch_norm_gather_stats_with_counts", gather_stats_program);
  gather.writes = {"running_mean", "running_var"};
  ops.push_back(gather);
  ops.push_back(make_rule("aten::batch_norm_elemt", elemt_program));
  ops.push_back(make_rule("aten::batch_norm_backward_reduce", backward_reduce_program));
  ops.push_back(make_rule("aten::batch_norm_backward_elemt", backward_elemt_program));
  for (size_t i = sync_first; i < ops.size(); ++i) ops[i].backend_values = true;
  return ops;
}

}  // namespace neuronsim::kernels::ops
