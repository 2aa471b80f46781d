// nll_loss forward and backward: the target positions resolved on the host, then the picked
// log-probabilities and weights gathered, negated, weighted and reduced (kernels/nll_loss.h).
// mse_loss: the squared difference (elementwise, or summed by kernels/mse_loss.h) and its backward,
// one elementwise pass. binary_cross_entropy, smooth_l1_loss and huber_loss: the CPU kernel's
// pointwise formula as an expression, elementwise (reduction none) or summed and scaled by
// kernels/expression_sum.h (mean, sum); their backwards one elementwise pass each.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/expression_sum.h"
#include "neuronsim/kernels/mse_loss.h"
#include "neuronsim/kernels/nll_loss.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;

// A one-element result as a 1-d tensor of one element.
TensorDesc one_element(TensorDesc d) {
  d.sizes = {1};
  d.strides = {1};
  return d;
}

// The broadcast of two shapes (right-aligned).
std::vector<int64_t> broadcast_sizes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

OpRule rule(std::string name, bool cacheable, std::function<Programs(const OpCall&)> build) {
  OpRule r = make_rule(std::move(name), std::move(build));
  // Losses whose programs follow from shapes and scalars (not from target indices) may reuse
  // cached programs.
  r.cacheable = cacheable;
  return r;
}

// The optional weight argument (None or an undefined tensor: unweighted).
std::optional<TensorArg> weight_arg(const OpCall& call) {
  if (!call.has("weight")) return std::nullopt;
  return call.tensor("weight");
}

// The targets resolved on the host into per-row positions (the index input read as the
// runtime's descriptor generation would): self[i, target[i]] and weight[target[i]], -1 for
// ignore_index. Out-of-range targets raise as the CPU kernel does.
NllLossSpec nll_spec(const OpCall& call, const TensorArg& self, bool weighted) {
  const std::vector<int64_t> t = read_integers(call.tensor("target"));
  const int64_t ignore = call.integer("ignore_index", -100);
  const int64_t classes = self.dim() == 1 ? static_cast<int64_t>(self.numel()) : self.size(-1);
  NllLossSpec spec;
  spec.reduction = static_cast<int>(call.integer("reduction", 1));
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore) {
      spec.self_pos.push_back(-1);
      if (weighted) spec.weight_pos.push_back(-1);
      continue;
    }
    if (t[i] < 0 || t[i] >= classes)
      throw std::out_of_range(fmt::format("Target {} is out of bounds.", t[i]));
    spec.self_pos.push_back(static_cast<int64_t>(i) * classes + t[i]);
    if (weighted) spec.weight_pos.push_back(t[i]);
  }
  return spec;
}

// A loss's pointwise formula over its tensor operands (inputs in the order given).
using LossExpr = std::function<void(Expr&, const std::vector<Arg>&)>;

std::vector<TensorDesc> describe_all(const std::vector<TensorArg>& tensors) {
  std::vector<TensorDesc> descs;
  for (const TensorArg& t : tensors) descs.push_back(t.desc);
  return descs;
}

// The expression inputs 0 .. n-1.
std::vector<Arg> input_args(size_t n) {
  std::vector<Arg> args;
  for (size_t i = 0; i < n; ++i) args.push_back(Arg::input(static_cast<int>(i)));
  return args;
}

// A reduced or pointwise loss: reduction 0 (none) stores the formula's value per element,
// 1 (mean) and 2 (sum) sum it (mean scaled by 1 / numel) into the one-element output.
Programs pointwise_loss(const OpCall& call, const std::vector<TensorArg>& operands,
                        const LossExpr& formula) {
  const std::vector<TensorDesc> descs = describe_all(operands);
  Expr e;
  formula(e, input_args(operands.size()));
  const TensorArg out = call.output(0);
  const int64_t reduction = call.integer("reduction", 1);
  if (reduction == 0) {
    return Programs{build_elementwise(call.name(), descs, out.desc, e, call.core())};
  }
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(operands.at(0).numel()));
  const float scale = reduction == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
  return Programs{
      build_expression_sum(call.name(), descs, e, one_element(out.desc), scale, call.core())};
}

// A loss backward: grad_output (a scalar for mean and sum, broadcast) times the formula's
// derivative, scaled by 1 / numel for mean, as the CPU kernels compute it.
Programs pointwise_loss_backward(
    const OpCall& call, const std::vector<TensorArg>& operands,
    const std::function<void(Expr&, const std::vector<Arg>&, float norm)>& derivative) {
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(call.tensor("self").numel()));
  const float norm = call.integer("reduction", 1) == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
  Expr e;
  derivative(e, input_args(operands.size()), norm);
  return Programs{
      build_elementwise(call.name(), describe_all(operands), call.output(0).desc, e, call.core())};
}
}  // namespace

std::vector<OpRule> loss_rules() {
  std::vector<OpRule> ops;
  ops.push_back(rule("aten::nll_loss_forward", false, [](const OpCall& call) {
    const TensorArg self = call.tensor(0);
    const auto weight = weight_arg(call);
    const auto spec = nll_spec(call, self, weight.has_value());
    const TensorDesc w = weight ? weight->desc : TensorDesc{};
    return Programs{build_nll_loss(call.name(), self.desc, weight ? &w : nullptr,
                                   call.output(0).desc, call.output(1).desc, spec, call.core())};
  }));
  ops.push_back(rule("aten::nll_loss_backward", false, [](const OpCall& call) {
    const TensorArg out = call.output(0);
    const auto weight = weight_arg(call);
    const auto spec = nll_spec(call, call.tensor("self"), weight.has_value());
    const TensorDesc w = weight ? weight->desc : TensorDesc{};
    return Programs{
        build_fill(call.name(), out.desc, 0.0f, call.core()),
        build_nll_loss_backward(call.name(), call.tensor("grad_output").desc, weight ? &w : nullptr,
                                call.tensor("total_weight").desc, out.desc, spec, call.core())};
  }));
  // mse_loss's reduction: 0 none, 1 mean, 2 sum (at::Reduction).
  ops.push_back(rule("aten::mse_loss", true, [](const OpCall& call) {
    const TensorArg self = call.tensor(0), target = call.tensor("target"), out = call.output(0);
    const int64_t reduction = call.integer("reduction", 1);
    if (reduction == 0) {
      Expr e;
      const Arg d = e.alu(AluOp::kSubtract, Arg::input(0), Arg::input(1));
      e.alu(AluOp::kMultiply, d, d);
      return Programs{
          build_elementwise(call.name(), {self.desc, target.desc}, out.desc, e, call.core())};
    }
    int64_t n = 1;
    for (int64_t s : broadcast_sizes(self.sizes(), target.sizes())) n *= s;
    const float scale = reduction == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
    return Programs{build_squared_error_sum(call.name(), self.desc, target.desc,
                                            one_element(out.desc), scale, call.core())};
  }));
  ops.push_back(rule("aten::mse_loss_backward", true, [](const OpCall& call) {
    // As the CPU kernel: norm * (self - target) * grad_output, norm = 2 (/ numel for mean).
    const TensorArg self = call.tensor("self");
    const double norm =
        call.integer("reduction", 1) == 1
            ? 2.0 / static_cast<double>(std::max<int64_t>(1, static_cast<int64_t>(self.numel())))
            : 2.0;
    Expr e;
    const Arg d = e.alu(AluOp::kSubtract, Arg::input(1), Arg::input(2));
    const Arg t = e.alu(AluOp::kMultiply, d, Arg::constant(static_cast<float>(norm)));
    e.alu(AluOp::kMultiply, t, Arg::input(0));
    return Programs{build_elementwise(
        call.name(), {call.tensor("grad_output").desc, self.desc, call.tensor("target").desc},
        call.output(0).desc, e, call.core())};
  }));
  // binary_cross_entropy: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times weight.
  ops.push_back(rule("aten::binary_cross_entropy", true, [](const OpCall& call) {
    std::vector<TensorArg> operands{call.tensor("self"), call.tensor("target")};
    const auto w = weight_arg(call);
    if (w) operands.push_back(*w);
    return pointwise_loss(call, operands, [&](Expr& e, const std::vector<Arg>& a) {
      const Arg log_1mx =
          e.alu(AluOp::kMax, e.act(ActFunc::kLog, a[0], -1.0f, 1.0f), Arg::constant(-100));
      const Arg log_x = e.alu(AluOp::kMax, e.act(ActFunc::kLog, a[0]), Arg::constant(-100));
      const Arg l =
          e.alu(AluOp::kSubtract,
                e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, a[1], Arg::constant(1)), log_1mx),
                e.alu(AluOp::kMultiply, a[1], log_x));
      if (a.size() > 2) e.alu(AluOp::kMultiply, l, a[2]);
    });
  }));
  // grad * (x - t) / max((1 - x) * x, 1e-12), times weight, / numel for mean.
  ops.push_back(rule("aten::binary_cross_entropy_backward", true, [](const OpCall& call) {
    std::vector<TensorArg> operands{call.tensor("grad_output"), call.tensor("self"),
                                    call.tensor("target")};
    const auto w = weight_arg(call);
    if (w) operands.push_back(*w);
    return pointwise_loss_backward(
        call, operands, [&](Expr& e, const std::vector<Arg>& a, float norm) {
          const Arg x = a[1];
          const Arg denom = e.alu(
              AluOp::kMax, e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, Arg::constant(1), x), x),
              Arg::constant(1e-12f));
          Arg g = e.alu(AluOp::kDivide,
                        e.alu(AluOp::kMultiply, a[0], e.alu(AluOp::kSubtract, x, a[2])), denom);
          if (a.size() > 3) g = e.alu(AluOp::kMultiply, g, a[3]);
          e.alu(AluOp::kMultiply, g, Arg::constant(norm));
        });
  }));
  // smooth_l1_loss: z = |x - t|; z < beta ? 0.5 z^2 / beta : z - 0.5 beta (beta 0: |x - t|).
  // huber_loss: z < delta ? 0.5 z^2 : delta (z - 0.5 delta).
  for (const bool huber : {false, true}) {
    ops.push_back(rule(
        huber ? "aten::huber_loss" : "aten::smooth_l1_loss", true, [huber](const OpCall& call) {
          const float b = static_cast<float>(call.number(huber ? "delta" : "beta", 1.0));
          return pointwise_loss(
              call, {call.tensor("self"), call.tensor("target")},
              [&](Expr& e, const std::vector<Arg>& a) {
                const Arg z =
                    e.alu(AluOp::kAbsMax, e.alu(AluOp::kSubtract, a[0], a[1]), Arg::constant(0));
                Arg quad =
                    e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, z, z), Arg::constant(0.5f));
                Arg lin = e.alu(AluOp::kSubtract, z, Arg::constant(0.5f * b));
                if (huber) {
                  lin = e.alu(AluOp::kMultiply, lin, Arg::constant(b));
                } else if (b > 0) {
                  quad = e.alu(AluOp::kDivide, quad, Arg::constant(b));
                }
                e.select(e.alu(AluOp::kIsLt, z, Arg::constant(b)), quad, lin);
              });
        }));
    // Their backwards, as the CPU kernels: x = self - target; x <= -b: -norm g (smooth_l1) or
    // -norm g delta (huber); x >= b: the same, positive; between: norm x g / beta (smooth_l1)
    // or norm x g (huber). The functional overloads are composites over these .grad_input ones.
    ops.push_back(rule(
        huber ? "aten::huber_loss_backward" : "aten::smooth_l1_loss_backward", true,
        [huber](const OpCall& call) {
          const float b = static_cast<float>(call.number(huber ? "delta" : "beta", 1.0));
          return pointwise_loss_backward(
              call, {call.tensor("grad_output"), call.tensor("self"), call.tensor("target")},
              [&](Expr& e, const std::vector<Arg>& a, float norm) {
                const Arg x = e.alu(AluOp::kSubtract, a[1], a[2]);
                const float edge = huber ? norm * b : norm;
                const Arg g_edge = e.alu(AluOp::kMultiply, a[0], Arg::constant(edge));
                Arg inner =
                    e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, x, Arg::constant(norm)), a[0]);
                if (!huber && b > 0) {
                  inner = e.alu(AluOp::kDivide, inner, Arg::constant(b));
                }
                const Arg neg_edge = e.alu(AluOp::kMultiply, g_edge, Arg::constant(-1.0f));
                const Arg upper = e.select(e.alu(AluOp::kIsGe, x, Arg::constant(b)), g_edge, inner);
                e.select(e.alu(AluOp::kIsLe, x, Arg::constant(-b)), neg_edge, upper);
              });
        }));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
