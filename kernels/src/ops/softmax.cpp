// softmax and log_softmax (and their backward) over one dim: the kernel library's softmax
// eagerly; in compiled graphs (last dim only) max, shift, exp, sum and scale as IR ops that fuse
// into one region with their neighbours.
#include "neuronsim/kernels/softmax.h"
#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/spmd.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;
using device_model::ReduceOp;
using graph::Lowerer;

int last_dim(Lowerer& l, int x, const std::string& arg) {
  const int64_t nd = l.meta(x).dim();
  const int64_t d = l.dim_arg(arg, nd);
  if (nd == 0 || d != nd - 1) throw graph::NotLowered("normalises a dim other than the last");
  return static_cast<int>(d);
}

void lower_softmax(Lowerer& l, bool log) {
  const int x = l.tensor("self");
  const int d = last_dim(l, x, "dim");
  const int y = l.node().outputs.at(0);
  const graph::TensorMeta row = Lowerer::keep(l.meta(x), d);
  const int m = l.temp(row, "max");
  l.reduce(x, m, ReduceOp::kMax, {d}, 1.0f);
  const int shifted = l.temp(l.meta(x), "shifted");
  l.begin();
  l.e().alu(AluOp::kSubtract, l.value(x), l.value(m));
  l.pointwise(shifted);
  const int ex = l.temp(l.meta(x), "exp");
  l.begin();
  l.e().act(ActFunc::kExp, l.value(shifted));
  l.pointwise(ex);
  const int s = l.temp(row, "sum");
  l.reduce(ex, s, ReduceOp::kAdd, {d}, 1.0f);
  l.begin();
  if (log) {
    l.e().alu(AluOp::kSubtract, l.value(shifted), l.e().act(ActFunc::kLog, l.value(s)));
  } else {
    l.e().alu(AluOp::kMultiply, l.value(ex), l.e().act(ActFunc::kReciprocal, l.value(s)));
  }
  l.pointwise(y);
}

void lower_softmax_backward(Lowerer& l, bool log) {
  const int g = l.tensor("grad_output");
  const int y = l.tensor("output");
  const int d = last_dim(l, y, "dim");
  const graph::TensorMeta row = Lowerer::keep(l.meta(y), d);
  const int out = l.node().outputs.at(0);
  const int s = l.temp(row, "sum");
  if (log) {
    // g - exp(y) * sum(g)
    l.reduce(g, s, ReduceOp::kAdd, {d}, 1.0f);
    l.begin();
    l.e().alu(AluOp::kSubtract, l.value(g),
              l.e().alu(AluOp::kMultiply, l.e().act(ActFunc::kExp, l.value(y)), l.value(s)));
  } else {
    // y * (g - sum(g * y))
    const int gy = l.temp(l.meta(y), "gy");
    l.begin();
    l.e().alu(AluOp::kMultiply, l.value(g), l.value(y));
    l.pointwise(gy);
    l.reduce(gy, s, ReduceOp::kAdd, {d}, 1.0f);
    l.begin();
    l.e().alu(AluOp::kMultiply, l.value(y), l.e().alu(AluOp::kSubtract, l.value(g), l.value(s)));
  }
  l.pointwise(out);
}

}  // namespace

std::vector<OpRule> softmax_rules() {
  std::vector<OpRule> ops;
  for (const char* n : {"aten::_softmax", "aten::_log_softmax"}) {
    const bool log = std::string(n) == "aten::_log_softmax";
    OpRule r;
    r.name = n;
    r.build = [log](const OpCall& call) {
      return Programs{build_softmax_grid(call.name(), call.tensor(0).desc, call.output(0).desc,
                                         call.integer("dim", -1), log, call.core(), call.grid())};
    };
    r.lower = [log](Lowerer& l) { lower_softmax(l, log); };
    ops.push_back(std::move(r));
  }
  for (const char* n : {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"}) {
    const bool log = std::string(n) == "aten::_log_softmax_backward_data";
    OpRule r;
    r.name = n;
    r.build = [log](const OpCall& call) {
      return Programs{build_softmax_backward_grid(
          call.name(), call.tensor(0).desc, call.tensor(1).desc, call.output(0).desc,
          call.integer("dim", -1), log, call.core(), call.grid())};
    };
    r.lower = [log](Lowerer& l) { lower_softmax_backward(l, log); };
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
