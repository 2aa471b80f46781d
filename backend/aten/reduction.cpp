// Reductions (sum, mean, max, argmax, any, var, ...) over any dims: the kernel library's reduce
// kernel.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "aten/native_ops.h"
#include "neuronsim/kernels/reduction.h"
#include "neuronsim/kernels/spmd.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

std::vector<int64_t> dims_arg(const OpInvocation& inv, const std::string& name, int64_t ndim) {
  std::vector<int64_t> out;
  if (!inv.has_arg(name)) return out;
  const c10::IValue& v = inv.arg(name);
  // A 0-d tensor's only dim (0 or -1) is the whole tensor: reduce everything.
  if (v.isNone() || ndim == 0) return out;
  if (v.isInt())
    out.push_back(v.toInt());
  else if (v.isIntList())
    out = v.toIntVector();
  for (auto& d : out) d = d < 0 ? d + ndim : d;
  return out;
}

int64_t reduced_count(const at::Tensor& in, const std::vector<int64_t>& dims) {
  if (dims.empty()) return in.numel();
  int64_t n = 1;
  for (int64_t d : dims) n *= in.size(d);
  return n;
}

// Positions (logical row-major element indices) of every element of `t`, as a CPU int64 tensor

// The reduction kernel folds the reduced dims (coalesced as it does: in memory order for value
// reductions, in logical order for arg reductions) into at most two runs.
bool reduced_dims_fold(const OpInvocation& inv, bool memory_order) {
  const at::Tensor in = inv.tensor(0);
  if (!in.defined()) return false;
  std::vector<int64_t> dims = dims_arg(inv, "dim", in.dim());
  std::vector<bool> red(in.dim(), dims.empty());
  for (int64_t d : dims) red.at(d) = true;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (red[d]) order.push_back(d);
  }
  if (memory_order) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return std::abs(in.stride(a)) > std::abs(in.stride(b));
    });
  }
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(1);
  for (int64_t d : order) {
    sizes.push_back(in.size(d));
    strides[0].push_back(in.stride(d));
  }
  kernels::coalesce(sizes, strides);
  return sizes.size() <= 2;
}

bool reduce_supported(const OpInvocation& inv) {
  return reduced_dims_fold(inv, true);
}

bool arg_reduce_supported(const OpInvocation& inv) {
  return reduced_dims_fold(inv, false);
}

// The order of a vector norm (linalg_vector_norm's ord, norm's optional p; 2 by default).
double norm_order(const OpInvocation& inv) {
  for (const char* n : {"ord", "p"}) {
    if (inv.has_arg(n) && !inv.arg(n).isNone()) return inv.arg(n).toScalar().toDouble();
  }
  return 2.0;
}

// 1 / count, NaN for an empty reduction (the CPU's mean of nothing: 0 / 0).
float mean_scale(int64_t count) {
  return count > 0 ? 1.0f / static_cast<float>(count) : std::numeric_limits<float>::quiet_NaN();
}

Programs reduce_program(const OpInvocation& inv, const at::Tensor& in, const at::Tensor& out,
                        kernels::ReduceSpec spec) {
  spec.dims = dims_arg(inv, "dim", in.dim());
  return {kernels::build_reduce_grid(inv.name, inv.describe(in), inv.describe(out), spec,
                                     inv.core(), inv.grid)};
}

}  // namespace

NativeOpTable reduction_ops() {
  NativeOpTable ops;
  auto simple = [](device::ReduceOp op, bool mean) {
    return [op, mean](const OpInvocation& inv) {
      const at::Tensor in = inv.tensor(0);
      kernels::ReduceSpec s;
      s.op = op;
      if (mean) s.scale = mean_scale(reduced_count(in, dims_arg(inv, "dim", in.dim())));
      return reduce_program(inv, in, inv.outputs.at(0), s);
    };
  };
  ops.push_back({"aten::sum", simple(device::ReduceOp::kAdd, false), reduce_supported});
  ops.push_back({"aten::mean", simple(device::ReduceOp::kAdd, true), reduce_supported});
  ops.push_back({"aten::amax", simple(device::ReduceOp::kMax, false), reduce_supported});
  ops.push_back({"aten::amin", simple(device::ReduceOp::kMin, false), reduce_supported});
  ops.push_back({"aten::prod", simple(device::ReduceOp::kMultiply, false), reduce_supported});
  // count_nonzero: the sum of (x != 0) over the dims (int64 values from the host).
  ops.push_back({"aten::count_nonzero",
                 [](const OpInvocation& inv) {
                   kernels::ReduceSpec s;
                   s.op = device::ReduceOp::kAdd;
                   s.nonzero = true;
                   return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
                 },
                 reduce_supported});
  // aminmax: (min, max) over one dim or all, two reductions of the same input.
  ops.push_back({"aten::aminmax",
                 [](const OpInvocation& inv) {
                   const at::Tensor in = inv.tensor(0);
                   kernels::ReduceSpec s;
                   s.op = device::ReduceOp::kMin;
                   Programs p = reduce_program(inv, in, inv.outputs.at(0), s);
                   s.op = device::ReduceOp::kMax;
                   Programs more = reduce_program(inv, in, inv.outputs.at(1), s);
                   p.insert(p.end(), more.begin(), more.end());
                   return p;
                 },
                 reduce_supported});
  for (const char* n : {"aten::max", "aten::min"}) {
    const auto op = std::string(n) == "aten::max" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    ops.push_back({n,
                   [op](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     kernels::ReduceSpec s;
                     s.op = op;
                     Programs p = reduce_program(inv, in, inv.outputs.at(0), s);
                     if (inv.outputs.size() > 1 &&
                         inv.outputs[1].defined()) {  // max.dim: values and indices
                       s.arg = true;
                       auto more = reduce_program(inv, in, inv.outputs[1], s);
                       p.insert(p.end(), more.begin(), more.end());
                     }
                     return p;
                   },
                   reduce_supported});
  }
  for (const char* n : {"aten::argmax", "aten::argmin"}) {
    const auto op =
        std::string(n) == "aten::argmax" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    ops.push_back({n,
                   [op](const OpInvocation& inv) {
                     kernels::ReduceSpec s;
                     s.op = op;
                     s.arg = true;
                     return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
                   },
                   arg_reduce_supported});
  }
  for (const char* n : {"aten::any", "aten::all"}) {
    const auto op = std::string(n) == "aten::any" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    ops.push_back({n,
                   [op](const OpInvocation& inv) {
                     kernels::ReduceSpec s;
                     s.op = op;
                     s.nonzero = true;
                     return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
                   },
                   reduce_supported});
  }
  for (const char* n : {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"}) {
    const std::string name = n;
    ops.push_back({n,
                   [name](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     const int64_t count = reduced_count(in, dims_arg(inv, "dim", in.dim()));
                     double correction = 1.0;
                     if (inv.has_arg("correction") && !inv.arg("correction").isNone()) {
                       correction = inv.arg("correction").toScalar().toDouble();
                     } else if (inv.has_arg("unbiased") && inv.arg("unbiased").isBool()) {
                       correction = inv.arg("unbiased").toBool() ? 1.0 : 0.0;
                     }
                     kernels::ReduceSpec s;
                     s.variance = true;
                     s.sqrt = name.find("std") != std::string::npos;
                     // As the CPU: sum / max(0, count - correction), so no degrees of
                     // freedom give NaN (a zero sum) or inf.
                     const double dof = std::max(0.0, static_cast<double>(count) - correction);
                     s.scale = dof > 0 ? static_cast<float>(1.0 / dof)
                                       : std::numeric_limits<float>::infinity();
                     Programs p = reduce_program(inv, in, inv.outputs.at(0), s);
                     if (inv.outputs.size() > 1) {
                       kernels::ReduceSpec m;
                       m.scale = mean_scale(count);
                       auto more = reduce_program(inv, in, inv.outputs[1], m);
                       p.insert(p.end(), more.begin(), more.end());
                     }
                     return p;
                   },
                   reduce_supported});
  }
  // Vector norms (every clip_grad_norm_ call): sum(|x|^p)^(1/p), max/min |x| for +-inf, the
  // nonzero count for 0.
  for (const char* n : {"aten::linalg_vector_norm", "aten::norm"}) {
    ops.push_back({n,
                   [](const OpInvocation& inv) {
                     const double p = norm_order(inv);
                     kernels::ReduceSpec s;
                     if (std::isinf(p)) {
                       s.op = p > 0 ? device::ReduceOp::kMax : device::ReduceOp::kMin;
                       s.abs = true;
                     } else if (p == 0.0) {
                       s.nonzero = true;
                     } else if (p == 2.0) {
                       s.power = 2.0f;
                       s.sqrt = true;
                     } else {
                       s.abs = true;
                       s.power = static_cast<float>(p);
                       s.root = p == 1.0 ? 1.0f : static_cast<float>(1.0 / p);
                     }
                     return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
                   },
                   [](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     return in.defined() && at::isFloatingType(in.scalar_type()) &&
                            !std::isnan(norm_order(inv)) && reduce_supported(inv);
                   }});
  }
  return ops;
}

}  // namespace neuronsim::backend
