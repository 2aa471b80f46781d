// nll_loss forward and backward: the target positions resolved on the host, then the picked
// log-probabilities and weights gathered, negated, weighted and reduced (kernels/nll_loss.h).
// mse_loss: the squared difference (elementwise, or summed by kernels/mse_loss.h) and its backward,
// one elementwise pass. binary_cross_entropy, smooth_l1_loss and huber_loss: the CPU kernel's
// pointwise formula as an expression, elementwise (reduction none) or summed and scaled by
// kernels/expression_sum.h (mean, sum); their backwards one elementwise pass each.
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/expression_sum.h"
#include "neuronsim/kernels/mse_loss.h"
#include "neuronsim/kernels/nll_loss.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// The optional weight argument (None or an undefined tensor: unweighted).
std::optional<at::Tensor> weight_arg(const OpInvocation& inv) {
  if (!inv.has_arg("weight")) return std::nullopt;
  const c10::IValue& w = inv.arg("weight");
  if (!w.isTensor() || !w.toTensor().defined()) return std::nullopt;
  return w.toTensor();
}

// The targets resolved on the host into per-row positions (the index input read as the
// runtime's descriptor generation would): self[i, target[i]] and weight[target[i]], -1 for
// ignore_index. Out-of-range targets raise as the CPU kernel does.
kernels::NllLossSpec nll_spec(const OpInvocation& inv, const at::Tensor& self, bool weighted) {
  const at::Tensor target = on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
  const int64_t ignore = inv.arg("ignore_index").toInt();
  const int64_t classes = self.dim() == 1 ? self.numel() : self.size(-1);
  kernels::NllLossSpec spec;
  spec.reduction = static_cast<int>(inv.arg("reduction").toInt());
  const auto t = target.accessor<int64_t, 1>();
  for (int64_t i = 0; i < target.numel(); ++i) {
    if (t[i] == ignore) {
      spec.self_pos.push_back(-1);
      if (weighted) spec.weight_pos.push_back(-1);
      continue;
    }
    TORCH_CHECK_INDEX(t[i] >= 0 && t[i] < classes, "Target ", t[i], " is out of bounds.");
    spec.self_pos.push_back(i * classes + t[i]);
    if (weighted) spec.weight_pos.push_back(t[i]);
  }
  return spec;
}

using device::ActFunc;
using device::AluOp;
using kernels::Arg;

// A loss's pointwise formula over its tensor operands (inputs in the order given).
using LossExpr = std::function<void(kernels::Expr&, const std::vector<Arg>&)>;

std::vector<kernels::TensorDesc> describe_all(const OpInvocation& inv,
                                              const std::vector<at::Tensor>& tensors) {
  std::vector<kernels::TensorDesc> descs;
  for (const at::Tensor& t : tensors) descs.push_back(inv.describe(t));
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
Programs pointwise_loss(const OpInvocation& inv, const std::vector<at::Tensor>& operands,
                        const LossExpr& formula) {
  const std::vector<kernels::TensorDesc> descs = describe_all(inv, operands);
  kernels::Expr e;
  formula(e, input_args(operands.size()));
  const at::Tensor& out = inv.outputs.at(0);
  const int64_t reduction = inv.arg("reduction").toInt();
  if (reduction == 0) {
    return Programs{kernels::build_elementwise(inv.name, descs, inv.describe(out), e, inv.core())};
  }
  const int64_t n = std::max<int64_t>(1, operands.at(0).numel());
  const float scale = reduction == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
  return Programs{kernels::build_expression_sum(inv.name, descs, e, inv.describe(out.reshape({1})),
                                                scale, inv.core())};
}

// A loss backward: grad_output (a scalar for mean and sum, broadcast) times the formula's
// derivative, scaled by 1 / numel for mean, as the CPU kernels compute it.
Programs pointwise_loss_backward(
    const OpInvocation& inv, const std::vector<at::Tensor>& operands,
    const std::function<void(kernels::Expr&, const std::vector<Arg>&, float norm)>& derivative) {
  const int64_t n = std::max<int64_t>(1, inv.arg("self").toTensor().numel());
  const float norm = inv.arg("reduction").toInt() == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
  kernels::Expr e;
  derivative(e, input_args(operands.size()), norm);
  return Programs{kernels::build_elementwise(inv.name, describe_all(inv, operands),
                                             inv.describe(inv.outputs.at(0)), e, inv.core())};
}
}  // namespace

NativeOpTable loss_ops() {
  NativeOpTable ops;
  ops.push_back(
      {"aten::nll_loss_forward", [](const OpInvocation& inv) {
         const at::Tensor self = inv.tensor(0);
         const auto weight = weight_arg(inv);
         const auto spec = nll_spec(inv, self, weight.has_value());
         const kernels::TensorDesc w = weight ? inv.describe(*weight) : kernels::TensorDesc{};
         return Programs{kernels::build_nll_loss(
             inv.name, inv.describe(self), weight ? &w : nullptr, inv.describe(inv.outputs.at(0)),
             inv.describe(inv.outputs.at(1)), spec, inv.core())};
       }});
  ops.push_back({"aten::nll_loss_backward", [](const OpInvocation& inv) {
                   const at::Tensor out = inv.outputs.at(0);
                   const auto weight = weight_arg(inv);
                   const auto spec = nll_spec(inv, inv.arg("self").toTensor(), weight.has_value());
                   const kernels::TensorDesc w =
                       weight ? inv.describe(*weight) : kernels::TensorDesc{};
                   return Programs{
                       kernels::build_fill(inv.name, inv.describe(out), 0.0f, inv.core()),
                       kernels::build_nll_loss_backward(
                           inv.name, inv.describe(inv.arg("grad_output").toTensor()),
                           weight ? &w : nullptr, inv.describe(inv.arg("total_weight").toTensor()),
                           inv.describe(out), spec, inv.core())};
                 }});
  // mse_loss's reduction: 0 none, 1 mean, 2 sum (at::Reduction).
  NativeOp mse{"aten::mse_loss", [](const OpInvocation& inv) {
                 const at::Tensor self = inv.tensor(0), target = inv.arg("target").toTensor();
                 const at::Tensor out = inv.outputs.at(0);
                 const int64_t reduction = inv.arg("reduction").toInt();
                 if (reduction == 0) {
                   kernels::Expr e;
                   const kernels::Arg d = e.alu(device::AluOp::kSubtract, kernels::Arg::input(0),
                                                kernels::Arg::input(1));
                   e.alu(device::AluOp::kMultiply, d, d);
                   return Programs{kernels::build_elementwise(
                       inv.name, {inv.describe(self), inv.describe(target)}, inv.describe(out), e,
                       inv.core())};
                 }
                 const int64_t n =
                     at::infer_size(self.sizes(), target.sizes()).empty()
                         ? 1
                         : c10::multiply_integers(at::infer_size(self.sizes(), target.sizes()));
                 const float scale = reduction == 1 ? 1.0f / static_cast<float>(n) : 1.0f;
                 return Programs{kernels::build_squared_error_sum(
                     inv.name, inv.describe(self), inv.describe(target),
                     inv.describe(out.reshape({1})), scale, inv.core())};
               }};
  mse.cacheable = true;
  ops.push_back(mse);
  NativeOp mse_backward{
      "aten::mse_loss_backward", [](const OpInvocation& inv) {
        // As the CPU kernel: norm * (self - target) * grad_output, norm = 2 (/ numel for mean).
        const at::Tensor self = inv.arg("self").toTensor();
        const double norm = inv.arg("reduction").toInt() == 1
                                ? 2.0 / static_cast<double>(std::max<int64_t>(1, self.numel()))
                                : 2.0;
        kernels::Expr e;
        const kernels::Arg d =
            e.alu(device::AluOp::kSubtract, kernels::Arg::input(1), kernels::Arg::input(2));
        const kernels::Arg t =
            e.alu(device::AluOp::kMultiply, d, kernels::Arg::constant(static_cast<float>(norm)));
        e.alu(device::AluOp::kMultiply, t, kernels::Arg::input(0));
        return Programs{kernels::build_elementwise(
            inv.name,
            {inv.describe(inv.arg("grad_output").toTensor()), inv.describe(self),
             inv.describe(inv.arg("target").toTensor())},
            inv.describe(inv.outputs.at(0)), e, inv.core())};
      }};
  mse_backward.cacheable = true;
  ops.push_back(mse_backward);
  // binary_cross_entropy: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times weight.
  NativeOp bce{
      "aten::binary_cross_entropy", [](const OpInvocation& inv) {
        std::vector<at::Tensor> ops{inv.arg("self").toTensor(), inv.arg("target").toTensor()};
        const auto w = weight_arg(inv);
        if (w) ops.push_back(*w);
        return pointwise_loss(inv, ops, [&](kernels::Expr& e, const std::vector<Arg>& a) {
          const Arg log_1mx =
              e.alu(AluOp::kMax, e.act(ActFunc::kLog, a[0], -1.0f, 1.0f), Arg::constant(-100));
          const Arg log_x = e.alu(AluOp::kMax, e.act(ActFunc::kLog, a[0]), Arg::constant(-100));
          const Arg l = e.alu(
              AluOp::kSubtract,
              e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, a[1], Arg::constant(1)), log_1mx),
              e.alu(AluOp::kMultiply, a[1], log_x));
          if (a.size() > 2) e.alu(AluOp::kMultiply, l, a[2]);
        });
      }};
  bce.cacheable = true;
  ops.push_back(bce);
  // grad * (x - t) / max((1 - x) * x, 1e-12), times weight, / numel for mean.
  NativeOp bce_backward{
      "aten::binary_cross_entropy_backward", [](const OpInvocation& inv) {
        std::vector<at::Tensor> ops{inv.arg("grad_output").toTensor(), inv.arg("self").toTensor(),
                                    inv.arg("target").toTensor()};
        const auto w = weight_arg(inv);
        if (w) ops.push_back(*w);
        return pointwise_loss_backward(
            inv, ops, [&](kernels::Expr& e, const std::vector<Arg>& a, float norm) {
              const Arg x = a[1];
              const Arg denom =
                  e.alu(AluOp::kMax,
                        e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, Arg::constant(1), x), x),
                        Arg::constant(1e-12f));
              Arg g = e.alu(AluOp::kDivide,
                            e.alu(AluOp::kMultiply, a[0], e.alu(AluOp::kSubtract, x, a[2])), denom);
              if (a.size() > 3) g = e.alu(AluOp::kMultiply, g, a[3]);
              e.alu(AluOp::kMultiply, g, Arg::constant(norm));
            });
      }};
  bce_backward.cacheable = true;
  ops.push_back(bce_backward);
  // smooth_l1_loss: z = |x - t|; z < beta ? 0.5 z^2 / beta : z - 0.5 beta (beta 0: |x - t|).
  // huber_loss: z < delta ? 0.5 z^2 : delta (z - 0.5 delta).
  for (const bool huber : {false, true}) {
    NativeOp fwd{
        huber ? "aten::huber_loss" : "aten::smooth_l1_loss", [huber](const OpInvocation& inv) {
          const float b = static_cast<float>(inv.scalar(huber ? "delta" : "beta", 1.0));
          return pointwise_loss(
              inv, {inv.arg("self").toTensor(), inv.arg("target").toTensor()},
              [&](kernels::Expr& e, const std::vector<Arg>& a) {
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
        }};
    fwd.cacheable = true;
    ops.push_back(fwd);
    // Their backwards, as the CPU kernels: x = self - target; x <= -b: -norm g (smooth_l1) or
    // -norm g delta (huber); x >= b: the same, positive; between: norm x g / beta (smooth_l1)
    // or norm x g (huber). The functional overloads are composites over these .grad_input ones.
    NativeOp bwd{huber ? "aten::huber_loss_backward" : "aten::smooth_l1_loss_backward",
                 [huber](const OpInvocation& inv) {
                   const float b = static_cast<float>(inv.scalar(huber ? "delta" : "beta", 1.0));
                   return pointwise_loss_backward(
                       inv,
                       {inv.arg("grad_output").toTensor(), inv.arg("self").toTensor(),
                        inv.arg("target").toTensor()},
                       [&](kernels::Expr& e, const std::vector<Arg>& a, float norm) {
                         const Arg x = e.alu(AluOp::kSubtract, a[1], a[2]);
                         const float edge = huber ? norm * b : norm;
                         const Arg g_edge = e.alu(AluOp::kMultiply, a[0], Arg::constant(edge));
                         Arg inner = e.alu(AluOp::kMultiply,
                                           e.alu(AluOp::kMultiply, x, Arg::constant(norm)), a[0]);
                         if (!huber && b > 0) {
                           inner = e.alu(AluOp::kDivide, inner, Arg::constant(b));
                         }
                         const Arg neg_edge = e.alu(AluOp::kMultiply, g_edge, Arg::constant(-1.0f));
                         const Arg upper =
                             e.select(e.alu(AluOp::kIsGe, x, Arg::constant(b)), g_edge, inner);
                         e.select(e.alu(AluOp::kIsLe, x, Arg::constant(-b)), neg_edge, upper);
                       });
                 }};
    bwd.cacheable = true;
    ops.push_back(bwd);
  }
  return ops;
}

}  // namespace neuronsim::backend
