// native_layer_norm and its backward: the kernel library's layer norm eagerly; in compiled
// graphs (one normalized dim) the statistics and the normalisation as IR ops.
#include <algorithm>

#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/layer_norm.h"
#include "neuronsim/kernels/spmd.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;
using device_model::ReduceOp;
using graph::Lowerer;

void lower_layer_norm(Lowerer& l) {
  const graph::Node& n = l.node();
  const int x = l.tensor("input");
  if (n.arg("normalized_shape").ints.size() != 1)
    throw graph::NotLowered("normalizes several dims");
  const int64_t nd = l.meta(x).dim();
  const int d = static_cast<int>(nd - 1);
  const float inv_d = 1.0f / static_cast<float>(std::max<int64_t>(1, l.meta(x).sizes.back()));
  const float eps = static_cast<float>(l.number("eps", 1e-5));
  const graph::TensorMeta row = Lowerer::keep(l.meta(x), d);
  const int mean = l.output(1, row, "mean");
  const int rstd = l.output(2, row, "rstd");
  const int y = l.output(0, l.meta(x), "out");
  l.reduce(x, mean, ReduceOp::kAdd, {d}, inv_d);
  const int xc = l.temp(l.meta(x), "centered");
  l.begin();
  l.e().alu(AluOp::kSubtract, l.value(x), l.value(mean));
  l.pointwise(xc);
  const int sq = l.temp(l.meta(x), "square");
  l.begin();
  const Arg c = l.value(xc);
  l.e().alu(AluOp::kMultiply, c, c);
  l.pointwise(sq);
  const int var = l.temp(row, "var");
  l.reduce(sq, var, ReduceOp::kAdd, {d}, inv_d);
  l.begin();
  l.e().act(ActFunc::kRsqrt, l.value(var), 1.0f, eps);
  l.pointwise(rstd);
  l.begin();
  Arg r = l.e().alu(AluOp::kMultiply, l.value(xc), l.value(rstd));
  if (l.has("weight")) r = l.e().alu(AluOp::kMultiply, r, l.operand("weight"));
  if (l.has("bias")) r = l.e().alu(AluOp::kAdd, r, l.operand("bias"));
  if (!l.has("weight") && !l.has("bias")) r = l.e().alu(AluOp::kBypass, r, Arg::constant(0));
  l.pointwise(y);
}

}  // namespace

std::vector<OpRule> layer_norm_rules() {
  std::vector<OpRule> ops;
  OpRule fwd;
  fwd.name = "aten::native_layer_norm";
  fwd.build = [](const OpCall& call) {
    LayerNormIo io;
    io.in = call.tensor(0).desc;
    io.out = call.output(0).desc;
    io.normalized_dims = static_cast<int64_t>(call.ints("normalized_shape").size());
    if (call.has("weight")) io.weight = call.tensor("weight").desc;
    if (call.has("bias")) io.bias = call.tensor("bias").desc;
    if (call.num_outputs() > 2 && call.output(1).defined && call.output(1).numel() > 0) {
      io.mean = call.output(1).desc;
      io.rstd = call.output(2).desc;
    }
    io.eps = static_cast<float>(call.number("eps", 1e-5));
    return Programs{build_layer_norm_grid(call.name(), io, call.core(), call.grid())};
  };
  fwd.lower = lower_layer_norm;
  ops.push_back(std::move(fwd));

  OpRule bwd;
  bwd.name = "aten::native_layer_norm_backward";
  bwd.build = [](const OpCall& call) {
    LayerNormBackwardIo io;
    io.grad_out = call.tensor("grad_out").desc;
    io.in = call.tensor("input").desc;
    io.mean = call.tensor("mean").desc;
    io.rstd = call.tensor("rstd").desc;
    io.normalized_dims = static_cast<int64_t>(call.ints("normalized_shape").size());
    if (call.has("weight")) io.weight = call.tensor("weight").desc;
    if (call.num_outputs() > 0 && call.output(0).defined) io.grad_in = call.output(0).desc;
    if (call.num_outputs() > 1 && call.output(1).defined) io.grad_weight = call.output(1).desc;
    if (call.num_outputs() > 2 && call.output(2).defined) io.grad_bias = call.output(2).desc;
    return Programs{build_layer_norm_backward(call.name(), io, call.core())};
  };
  // One pass per row: the normalized size must fit SBUF and eight PSUM-bank column sums.
  bwd.supports = [](const OpCall& call) {
    int64_t d = 1;
    for (int64_t s : call.ints("normalized_shape")) d *= s;
    return d <= 4096;
  };
  ops.push_back(std::move(bwd));
  return ops;
}

}  // namespace neuronsim::kernels::ops
