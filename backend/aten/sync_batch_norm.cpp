// nn.SyncBatchNorm's ops: PyTorch implements batch_norm_stats, batch_norm_gather_stats_with_counts,
// batch_norm_elemt, batch_norm_backward_reduce and batch_norm_backward_elemt for CUDA only
// (nn.SyncBatchNorm accepts the PrivateUse1 device and calls them), so fast mode's values are
// computed here with CUDA's formulas in the accumulate type (fp32 for half and bfloat16 data);
// the time, and ISA mode's values, are the op library's programs (kernels/src/ops/batch_norm.cpp;
// with no Meta kernels, ISA mode sizes the outputs with these host values). The .out overloads
// copy into their outputs.
#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include "aten/native_ops.h"

namespace neuronsim::backend {
namespace {

using torch::jit::Stack;

at::Tensor opt_tensor(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor() : at::Tensor();
}

c10::ScalarType acc_type(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ? at::kFloat
                                                                          : t.scalar_type();
}

// Every dim but the channel dim (1).
std::vector<int64_t> reduce_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A [C] vector shaped to broadcast over x's channel dim.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x, c10::ScalarType acc) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return v.to(acc).reshape(shape);
}

void check_data(const char* op, const char* what, const at::Tensor& x) {
  TORCH_CHECK(x.defined() && x.dim() >= 2, op, ": ", what,
              " must be [N, C, *] with at least 2 dims, got ",
              x.defined() ? x.sizes() : at::IntArrayRef{});
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), op, ": ", what,
              " must be a floating tensor, got ", x.scalar_type());
}

void check_channels(const char* op, int64_t C,
                    std::initializer_list<std::pair<const char*, at::Tensor>> vs) {
  for (const auto& [what, v] : vs) {
    if (!v.defined()) continue;
    TORCH_CHECK(v.numel() == C, op, ": ", what, " must have one value per channel (", C,
                "), got sizes ", v.sizes());
  }
}

// 1 / sqrt(var + eps), 0 where var and eps are both 0 (CUDA's InvStd).
at::Tensor inv_std(const at::Tensor& var, double eps) {
  at::Tensor r = (var + eps).rsqrt();
  if (eps == 0) r = at::where(var == 0, at::zeros_like(r), r);
  return r;
}

// Pops the op's arguments; returns them with the .out overload's outputs split off.
std::pair<std::vector<c10::IValue>, std::vector<at::Tensor>> pop_args(const c10::OperatorHandle& op,
                                                                      Stack* stack,
                                                                      size_t n_functional) {
  const size_t n = op.schema().arguments().size();
  std::vector<c10::IValue> a = torch::jit::pop(*stack, n);
  std::vector<at::Tensor> outs;
  for (size_t i = n_functional; i < n; ++i) outs.push_back(a[i].toTensor());
  a.resize(n_functional);
  return {std::move(a), std::move(outs)};
}

// Pushes the results (into the .out overload's outputs, when given).
void push_results(Stack* stack, std::vector<at::Tensor> results, std::vector<at::Tensor>& outs) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!outs.empty()) {
      if (results[i].defined()) {
        outs[i].resize_(results[i].sizes());
        outs[i].copy_(results[i]);
      }
      results[i] = outs[i];
    }
    torch::jit::push(*stack, results[i]);
  }
}

void stats_values(const c10::OperatorHandle& op, Stack* stack) {
  auto [a, outs] = pop_args(op, stack, 2);
  const at::Tensor x = a[0].toTensor();
  const double eps = a[1].toDouble();
  check_data("batch_norm_stats", "input", x);
  TORCH_CHECK(x.numel() > 0, "batch_norm_stats: input of sizes ", x.sizes(), " is empty");
  const auto [var, mean] = at::var_mean(x.to(acc_type(x)), reduce_dims(x), 0, false);
  push_results(stack, {mean, inv_std(var, eps)}, outs);
}

void gather_stats_values(const c10::OperatorHandle& op, Stack* stack) {
  auto [a, outs] = pop_args(op, stack, 8);
  const char* name = "batch_norm_gather_stats_with_counts";
  const at::Tensor x = a[0].toTensor(), mean = a[1].toTensor(), invstd = a[2].toTensor();
  at::Tensor rm = opt_tensor(a[3]), rv = opt_tensor(a[4]);
  const double momentum = a[5].toDouble(), eps = a[6].toDouble();
  const at::Tensor counts = a[7].toTensor();
  TORCH_CHECK(mean.dim() == 2 && invstd.sizes().equals(mean.sizes()), name,
              ": mean and invstd must be [world_size, C] of equal sizes, got ", mean.sizes(),
              " and ", invstd.sizes());
  TORCH_CHECK(counts.numel() == mean.size(0), name, ": counts must have one value per rank (",
              mean.size(0), "), got sizes ", counts.sizes());
  check_channels(name, mean.size(1), {{"running_mean", rm}, {"running_var", rv}});
  const auto acc = acc_type(mean);
  const at::Tensor c = counts.to(acc).reshape({-1, 1}), m = mean.to(acc);
  const at::Tensor v = (invstd.to(acc).pow(-2) - eps) * c;  // each rank's sum of squares
  const at::Tensor n = c.sum(0);
  const at::Tensor avg = (c * m).sum(0) / n;
  const at::Tensor var_n = v.sum(0) + (c * (m - avg).square()).sum(0);
  if (rm.defined()) rm.copy_(rm.to(acc) * (1 - momentum) + avg * momentum);
  if (rv.defined()) rv.copy_(rv.to(acc) * (1 - momentum) + var_n / (n - 1) * momentum);
  (void)x;
  push_results(stack, {avg.to(mean.scalar_type()), inv_std(var_n / n, eps).to(mean.scalar_type())},
               outs);
}

void elemt_values(const c10::OperatorHandle& op, Stack* stack) {
  auto [a, outs] = pop_args(op, stack, 6);
  const char* name = "batch_norm_elemt";
  const at::Tensor x = a[0].toTensor(), w = opt_tensor(a[1]), b = opt_tensor(a[2]);
  const at::Tensor mean = a[3].toTensor(), invstd = a[4].toTensor();
  check_data(name, "input", x);
  check_channels(name, x.size(1), {{"weight", w}, {"bias", b}, {"mean", mean}, {"invstd", invstd}});
  const auto acc = acc_type(x);
  at::Tensor y = (x.to(acc) - per_channel(mean, x, acc)) * per_channel(invstd, x, acc);
  if (w.defined()) y = y * per_channel(w, x, acc);
  if (b.defined()) y = y + per_channel(b, x, acc);
  at::Tensor out = at::empty_like(x, x.suggest_memory_format());
  out.copy_(y);
  push_results(stack, {out}, outs);
}

void backward_reduce_values(const c10::OperatorHandle& op, Stack* stack) {
  auto [a, outs] = pop_args(op, stack, 8);
  const char* name = "batch_norm_backward_reduce";
  const at::Tensor g = a[0].toTensor(), x = a[1].toTensor(), mean = a[2].toTensor(),
                   invstd = a[3].toTensor(), w = opt_tensor(a[4]);
  const bool input_g = a[5].toBool(), weight_g = a[6].toBool(), bias_g = a[7].toBool();
  check_data(name, "input", x);
  TORCH_CHECK(g.sizes().equals(x.sizes()), name, ": grad_out of sizes ", g.sizes(),
              " must match input ", x.sizes());
  check_channels(name, x.size(1), {{"weight", w}, {"mean", mean}, {"invstd", invstd}});
  const auto acc = acc_type(x);
  const at::Tensor gf = g.to(acc);
  const at::Tensor sum_dy = gf.sum(reduce_dims(x));
  const at::Tensor sum_dy_xmu = (gf * (x.to(acc) - per_channel(mean, x, acc))).sum(reduce_dims(x));
  const auto stat = mean.scalar_type();
  const auto param = w.defined() ? w.scalar_type() : stat;
  push_results(
      stack,
      {input_g ? sum_dy.to(stat) : at::Tensor(), input_g ? sum_dy_xmu.to(stat) : at::Tensor(),
       weight_g ? (sum_dy_xmu * invstd.to(acc)).to(param) : at::Tensor(),
       bias_g ? sum_dy.to(param) : at::Tensor()},
      outs);
}

void backward_elemt_values(const c10::OperatorHandle& op, Stack* stack) {
  auto [a, outs] = pop_args(op, stack, 8);
  const char* name = "batch_norm_backward_elemt";
  const at::Tensor g = a[0].toTensor(), x = a[1].toTensor(), mean = a[2].toTensor(),
                   invstd = a[3].toTensor(), w = opt_tensor(a[4]), sum_dy = a[5].toTensor(),
                   sum_dy_xmu = a[6].toTensor(), count = a[7].toTensor();
  check_data(name, "input", x);
  TORCH_CHECK(g.sizes().equals(x.sizes()), name, ": grad_out of sizes ", g.sizes(),
              " must match input ", x.sizes());
  check_channels(name, x.size(1),
                 {{"weight", w},
                  {"mean", mean},
                  {"invstd", invstd},
                  {"sum_dy", sum_dy},
                  {"sum_dy_xmu", sum_dy_xmu}});
  TORCH_CHECK(!at::isFloatingType(count.scalar_type()) || count.scalar_type() == at::kFloat, name,
              ": count must be an integer (or float) tensor of per-rank counts, got ",
              count.scalar_type());
  const auto acc = acc_type(x);
  const at::Tensor norm = 1.0 / count.to(acc).sum();
  const at::Tensor is = per_channel(invstd, x, acc);
  const at::Tensor mean_dy = per_channel(sum_dy, x, acc) * norm;
  const at::Tensor mean_dy_xmu = per_channel(sum_dy_xmu, x, acc) * norm;
  at::Tensor gi =
      (g.to(acc) - mean_dy - (x.to(acc) - per_channel(mean, x, acc)) * is * is * mean_dy_xmu) * is;
  if (w.defined()) gi = gi * per_channel(w, x, acc);
  at::Tensor out = at::empty_like(x, x.suggest_memory_format());
  out.copy_(gi);
  push_results(stack, {out}, outs);
}

}  // namespace

HostValueTable sync_batch_norm_host_values() {
  return {{"aten::batch_norm_stats", stats_values},
          {"aten::batch_norm_gather_stats_with_counts", gather_stats_values},
          {"aten::batch_norm_elemt", elemt_values},
          {"aten::batch_norm_backward_reduce", backward_reduce_values},
          {"aten::batch_norm_backward_elemt", backward_elemt_values}};
}

}  // namespace neuronsim::backend
