// Reductions (sum, mean, max, argmax, any, var, norms, ...) over any dims: the kernel library's
// reduce kernel eagerly; a reduce op of the IR in compiled graphs.
#include <algorithm>
#include <cmath>
#include <limits>

#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/reduction.h"
#include "neuronsim/kernels/spmd.h"
#include "neuronsim/kernels/tiling.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ReduceOp;
using graph::Lowerer;

// The reduced dims, wrapped; empty (everything) when absent or None, or for a 0-d input.
std::vector<int64_t> dims_arg(const OpCall& call, int64_t ndim) {
  if (!call.has("dim") || ndim == 0) return {};
  std::vector<int64_t> out = call.ints("dim");
  for (auto& d : out) d = d < 0 ? d + ndim : d;
  return out;
}

int64_t reduced_count(const TensorArg& in, const std::vector<int64_t>& dims) {
  if (dims.empty()) return static_cast<int64_t>(in.numel());
  int64_t n = 1;
  for (int64_t d : dims) n *= in.size(d);
  return n;
}

// The reduction kernel folds the reduced dims (coalesced as it does: in memory order for value
// reductions, in logical order for arg reductions) into at most two runs.
bool reduced_dims_fold(const OpCall& call, bool memory_order) {
  const TensorArg in = call.tensor(0);
  if (!in.defined) return false;
  const std::vector<int64_t> dims = dims_arg(call, in.dim());
  std::vector<bool> red(static_cast<size_t>(in.dim()), dims.empty());
  for (int64_t d : dims) red.at(static_cast<size_t>(d)) = true;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (red[static_cast<size_t>(d)]) order.push_back(d);
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
  coalesce(sizes, strides);
  return sizes.size() <= 2;
}

bool reduce_supported(const OpCall& call) {
  return reduced_dims_fold(call, true);
}

// The order of a vector norm (linalg_vector_norm's ord, norm's optional p; 2 by default).
double norm_order(const OpCall& call) {
  for (const char* n : {"ord", "p"}) {
    if (call.has(n)) return call.number(n, 2.0);
  }
  return 2.0;
}

// 1 / count, NaN for an empty reduction (the CPU's mean of nothing: 0 / 0).
float mean_scale(int64_t count) {
  return count > 0 ? 1.0f / static_cast<float>(count) : std::numeric_limits<float>::quiet_NaN();
}

Programs reduce_program(const OpCall& call, const TensorArg& in, const TensorArg& out,
                        ReduceSpec spec) {
  spec.dims = dims_arg(call, in.dim());
  return {build_reduce_grid(call.name(), in.desc, out.desc, spec, call.core(), call.grid())};
}

Programs append(Programs p, Programs more) {
  p.insert(p.end(), more.begin(), more.end());
  return p;
}

// A reduce op of the IR over the node's dims (every dim when none are given).
void lower_reduce(Lowerer& l, ReduceOp r, bool mean, bool nonzero = false) {
  const int x = l.tensor("self");
  const graph::TensorMeta& m = l.meta(x);
  std::vector<int64_t> dims;
  const graph::Arg* dim = l.node().find("dim");
  const int64_t nd = std::max<int64_t>(m.dim(), 1);
  if (dim && dim->kind == graph::Arg::Kind::kInts) {
    for (int64_t d : dim->ints) dims.push_back(d < 0 ? d + nd : d);
  } else if (dim && dim->kind == graph::Arg::Kind::kInt) {
    dims.push_back(dim->i < 0 ? dim->i + nd : dim->i);
  }
  if (dims.empty() || m.dim() == 0) {
    dims.clear();
    for (int64_t d = 0; d < m.dim(); ++d) dims.push_back(d);
  }
  if (l.has("dtype") && l.str("dtype").empty()) {
    // dtype= given as a non-string: the framework side passes dtypes as strings.
    throw graph::NotLowered("dtype argument");
  }
  uint64_t count = 1;
  for (int64_t d : dims) count *= static_cast<uint64_t>(m.sizes.at(static_cast<size_t>(d)));
  const float scale = mean ? 1.0f / static_cast<float>(std::max<uint64_t>(count, 1)) : 1.0f;
  l.reduce(x, l.node().outputs.at(0), r, dims, scale, nonzero);
}

OpRule rule(std::string name, std::function<Programs(const OpCall&)> build,
            std::function<bool(const OpCall&)> supports = reduce_supported,
            std::function<void(Lowerer&)> lower = nullptr) {
  return make_rule(std::move(name), std::move(build), std::move(supports), std::move(lower));
}

}  // namespace

std::vector<OpRule> reduction_rules() {
  std::vector<OpRule> ops;
  auto simple = [](ReduceOp op, bool mean) {
    return [op, mean](const OpCall& call) {
      const TensorArg in = call.tensor(0);
      ReduceSpec s;
      s.op = op;
      if (mean) s.scale = mean_scale(reduced_count(in, dims_arg(call, in.dim())));
      return reduce_program(call, in, call.output(0), s);
    };
  };
  struct Simple {
    const char* name;
    ReduceOp op;
    bool mean;
  };
  for (const Simple& s : {Simple{"aten::sum", ReduceOp::kAdd, false},
                          {"aten::mean", ReduceOp::kAdd, true},
                          {"aten::amax", ReduceOp::kMax, false},
                          {"aten::amin", ReduceOp::kMin, false},
                          {"aten::prod", ReduceOp::kMultiply, false}}) {
    ops.push_back(rule(s.name, simple(s.op, s.mean), reduce_supported,
                       [s](Lowerer& l) { lower_reduce(l, s.op, s.mean); }));
  }
  // nansum: the sum with NaN read as zero (nanmean is nansum over the count of non-NaN elements,
  // both native).
  ops.push_back(rule("aten::nansum", [](const OpCall& call) {
    ReduceSpec s;
    s.ignore_nan = true;
    return reduce_program(call, call.tensor(0), call.output(0), s);
  }));
  // count_nonzero: the sum of (x != 0) over the dims (int64 values from the host).
  ops.push_back(rule("aten::count_nonzero", [](const OpCall& call) {
    ReduceSpec s;
    s.op = ReduceOp::kAdd;
    s.nonzero = true;
    return reduce_program(call, call.tensor(0), call.output(0), s);
  }));
  // aminmax: (min, max) over one dim or all, two reductions of the same input.
  ops.push_back(rule("aten::aminmax", [](const OpCall& call) {
    const TensorArg in = call.tensor(0);
    ReduceSpec s;
    s.op = ReduceOp::kMin;
    Programs p = reduce_program(call, in, call.output(0), s);
    s.op = ReduceOp::kMax;
    return append(std::move(p), reduce_program(call, in, call.output(1), s));
  }));
  for (const char* n : {"aten::max", "aten::min"}) {
    const auto op = std::string(n) == "aten::max" ? ReduceOp::kMax : ReduceOp::kMin;
    ops.push_back(rule(n, [op](const OpCall& call) {
      const TensorArg in = call.tensor(0);
      ReduceSpec s;
      s.op = op;
      Programs p = reduce_program(call, in, call.output(0), s);
      if (call.num_outputs() > 1 && call.output(1).defined) {  // max.dim: values and indices
        s.arg = true;
        p = append(std::move(p), reduce_program(call, in, call.output(1), s));
      }
      return p;
    }));
  }
  for (const char* n : {"aten::argmax", "aten::argmin"}) {
    const auto op = std::string(n) == "aten::argmax" ? ReduceOp::kMax : ReduceOp::kMin;
    ops.push_back(rule(
        n,
        [op](const OpCall& call) {
          ReduceSpec s;
          s.op = op;
          s.arg = true;
          return reduce_program(call, call.tensor(0), call.output(0), s);
        },
        [](const OpCall& call) { return reduced_dims_fold(call, false); }));
  }
  for (const char* n : {"aten::any", "aten::all"}) {
    const auto op = std::string(n) == "aten::any" ? ReduceOp::kMax : ReduceOp::kMin;
    ops.push_back(rule(
        n,
        [op](const OpCall& call) {
          ReduceSpec s;
          s.op = op;
          s.nonzero = true;
          return reduce_program(call, call.tensor(0), call.output(0), s);
        },
        reduce_supported, [op](Lowerer& l) { lower_reduce(l, op, false, true); }));
  }
  for (const char* n : {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"}) {
    const bool sqrt = std::string(n).find("std") != std::string::npos;
    ops.push_back(rule(n, [sqrt](const OpCall& call) {
      const TensorArg in = call.tensor(0);
      const int64_t count = reduced_count(in, dims_arg(call, in.dim()));
      double correction = 1.0;
      if (call.has("correction")) {
        correction = call.number("correction", 1.0);
      } else if (call.kind("unbiased") == ArgKind::kBool) {
        correction = call.boolean("unbiased", true) ? 1.0 : 0.0;
      }
      ReduceSpec s;
      s.variance = true;
      s.sqrt = sqrt;
      // As the CPU: sum / max(0, count - correction), so no degrees of freedom give NaN (a zero
      // sum) or inf.
      const double dof = std::max(0.0, static_cast<double>(count) - correction);
      s.scale = dof > 0 ? static_cast<float>(1.0 / dof) : std::numeric_limits<float>::infinity();
      Programs p = reduce_program(call, in, call.output(0), s);
      if (call.num_outputs() > 1) {
        ReduceSpec m;
        m.scale = mean_scale(count);
        p = append(std::move(p), reduce_program(call, in, call.output(1), m));
      }
      return p;
    }));
  }
  // Vector norms (every clip_grad_norm_ call): sum(|x|^p)^(1/p), max/min |x| for +-inf, the
  // nonzero count for 0.
  for (const char* n : {"aten::linalg_vector_norm", "aten::norm"}) {
    ops.push_back(rule(
        n,
        [](const OpCall& call) {
          const double p = norm_order(call);
          ReduceSpec s;
          if (std::isinf(p)) {
            s.op = p > 0 ? ReduceOp::kMax : ReduceOp::kMin;
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
          return reduce_program(call, call.tensor(0), call.output(0), s);
        },
        [](const OpCall& call) {
          const TensorArg in = call.tensor(0);
          return in.defined && in.is_floating() && !std::isnan(norm_order(call)) &&
                 reduce_supported(call);
        }));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
