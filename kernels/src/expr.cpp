#include "neuronsim/kernels/expr.h"

namespace neuronsim::kernels {

using device_model::ActFunc;
using device_model::AluOp;

Arg Expr::alu(AluOp op, Arg a, Arg b) {
  Step s;
  s.kind = Step::kAlu;
  s.alu = op;
  s.a = a;
  s.b = b;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

Arg Expr::act(ActFunc f, Arg a, float scale, float bias) {
  Step s;
  s.kind = Step::kAct;
  s.act = f;
  s.a = a;
  s.scale = scale;
  s.bias = bias;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

Arg Expr::select(Arg pred, Arg on_true, Arg on_false) {
  Step s;
  s.kind = Step::kSelect;
  s.a = pred;
  s.b = on_true;
  s.c = on_false;
  steps.push_back(s);
  return Arg::step(static_cast<int>(steps.size()) - 1);
}

}  // namespace neuronsim::kernels
