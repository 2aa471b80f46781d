// Eager programs of elementwise ops: an expression rule run over one call's device tensors, and
// the elementwise ops that are not one expression with one result (two results in one pass,
// halves of a tensor, fills).
#include <stdexcept>

#include "neuronsim/kernels/spmd.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::ActFunc;
using device_model::AluOp;

// An eager call's arguments as expression operands: device tensors become inputs (in the order
// the rule asks for them), numbers and host scalar tensors constants.
class CallOperands : public ExprOperands {
 public:
  CallOperands(const OpCall& call, Expr* e) : call_(call), e_(e) {}

  Arg get(std::string_view name) override {
    if (is_tensor(name)) {
      const TensorArg t = call_.tensor(name);
      inputs.push_back(t.desc);
      integer_inputs_ &= t.is_integral(true);
      // Integer arithmetic only when every operand so far and the result are integers (the
      // rules that divide read it while they build).
      if (e_) e_->integer = integer_inputs_ && is_integral(out_type(), true);
      return Arg::input(static_cast<int>(inputs.size()) - 1);
    }
    return Arg::constant(static_cast<float>(call_.number(name, 0.0)));
  }
  bool has(std::string_view name) const override { return call_.has(name); }
  bool is_tensor(std::string_view name) const override {
    return call_.kind(name) == ArgKind::kTensor && call_.tensor(name).on_device;
  }
  double num(std::string_view name, double fallback) const override {
    return call_.number(name, fallback);
  }
  std::string str(std::string_view name) const override { return call_.str(name); }
  ScalarType type(std::string_view name) const override {
    return call_.kind(name) == ArgKind::kTensor ? call_.tensor(name).type : ScalarType::kOther;
  }
  ScalarType out_type() const override { return call_.output(0).type; }

  std::vector<TensorDesc> inputs;

 private:
  const OpCall& call_;
  Expr* e_;
  bool integer_inputs_ = true;
};

}  // namespace

Programs build_expression(const std::string& name, const ExprRule& rule, const OpCall& call) {
  const TensorArg out = call.output(0);
  Expr e;
  if (is_complex(out.type)) {
    // Only zero fills reach here with complex data (the backend's dtype check): the real view
    // is filled with zeros.
    e.alu(AluOp::kBypass, Arg::constant(0), Arg::constant(0));
    return {build_elementwise(name, {}, out.desc, e, call.core())};
  }
  CallOperands operands(call, &e);
  e.integer = is_integral(out.type, true);
  rule.build(operands, e);
  return {build_elementwise_grid(name, operands.inputs, out.desc, e, call.core(), call.grid())};
}

bool expression_supports(const ExprRule& rule, const OpCall& call) {
  if (!rule.supports) return true;
  const CallOperands operands(call, nullptr);
  return rule.supports(operands);
}

std::vector<OpRule> elementwise_program_rules() {
  std::vector<OpRule> ops;
  auto add = [&ops](std::string name, std::function<Programs(const OpCall&)> build,
                    std::function<bool(const OpCall&)> supports = nullptr) {
    OpRule r;
    r.name = std::move(name);
    r.build = std::move(build);
    r.supports = std::move(supports);
    ops.push_back(std::move(r));
  };
  // log_sigmoid_forward's two results in one pass, as the CPU kernel computes them:
  // buffer = exp(-|x|), output = min(x, 0) - log1p(buffer) (its backward reads the buffer).
  add("aten::log_sigmoid_forward", [](const OpCall& call) {
    Expr e;
    const Arg x = Arg::input(0);
    const Arg z = e.act(ActFunc::kExp, e.alu(AluOp::kAbsMax, x, Arg::constant(0)), -1.0f);
    const Arg out = e.alu(AluOp::kSubtract, e.alu(AluOp::kMin, x, Arg::constant(0)),
                          e.act(ActFunc::kLog, z, 1.0f, 1.0f));
    return Programs{build_elementwise(
        call.name(), {call.tensor("self").desc},
        {{call.output(0).desc, out.index}, {call.output(1).desc, z.index}}, e, call.core())};
  });
  // A complex tensor is zeroed as its real view (two floats per element).
  add("aten::zero", [](const OpCall& call) {
    const TensorArg out = call.output(0);
    Expr e;
    e.alu(AluOp::kBypass, Arg::constant(0), Arg::constant(0));
    e.integer = out.is_integral(true);
    return Programs{build_elementwise("aten::zero", {}, out.desc, e, call.core())};
  });
  // glu(x, dim) = a * sigmoid(b) over x's halves along dim; its backward writes both halves of
  // grad_input in one pass: g * sigmoid(b), and g * a * sigmoid(b) * (1 - sigmoid(b)).
  auto halves = [](const OpCall& call, const TensorArg& t) {
    const int64_t dim = call.dim("dim", t.dim());
    const int64_t h = t.size(dim) / 2;
    return std::pair{t.narrow(dim, 0, h), t.narrow(dim, h, h)};
  };
  auto glu_supported = [](const OpCall& call) {
    const TensorArg x = call.tensor("self");
    if (!x.defined || x.dim() == 0 || !x.is_floating()) return false;
    const int64_t dim = call.integer("dim", -1);
    return dim >= -x.dim() && dim < x.dim() && x.size(dim) % 2 == 0;  // else the CPU's error
  };
  add(
      "aten::glu",
      [halves](const OpCall& call) {
        const auto [a, b] = halves(call, call.tensor("self"));
        Expr e;
        e.alu(AluOp::kMultiply, Arg::input(0), e.act(ActFunc::kSigmoid, Arg::input(1)));
        return Programs{build_elementwise_grid(call.name(), {a.desc, b.desc}, call.output(0).desc,
                                               e, call.core(), call.grid())};
      },
      glu_supported);
  add(
      "aten::glu_backward",
      [halves](const OpCall& call) {
        const auto [a, b] = halves(call, call.tensor("self"));
        const auto [ga, gb] = halves(call, call.output(0));
        Expr e;
        const Arg g = Arg::input(0);
        const Arg sig = e.act(ActFunc::kSigmoid, Arg::input(2));
        const Arg grad_a = e.alu(AluOp::kMultiply, sig, g);
        const Arg dsig =
            e.alu(AluOp::kMultiply, e.alu(AluOp::kSubtract, Arg::constant(1), sig), sig);
        const Arg grad_b = e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, dsig, Arg::input(1)), g);
        return Programs{
            build_elementwise(call.name(), {call.tensor("grad_output").desc, a.desc, b.desc},
                              {{ga.desc, grad_a.index}, {gb.desc, grad_b.index}}, e, call.core())};
      },
      glu_supported);
  add("aten::arange", [](const OpCall& call) {
    return Programs{build_arange(call.name(), call.output(0).desc, call.number("start", 0),
                                 call.number("step", 1), call.core())};
  });
  return ops;
}

}  // namespace neuronsim::kernels::ops
