#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "neuronsim/kernels/compiler/lower.h"
#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/ops/op_rule.h"

namespace neuronsim::kernels::compiler {

using device_model::ActFunc;
using device_model::AluOp;
using device_model::ReduceOp;
using graph::Lowerer;
using graph::NotLowered;

namespace {

using Rule = std::function<void(Lowerer&)>;

// A node's arguments as an expression rule reads them (kernels/ops/expr_rule.h).
class NodeOperands : public ops::ExprOperands {
 public:
  explicit NodeOperands(Lowerer& l) : l_(l) {}
  kernels::Arg get(std::string_view name) override { return l_.operand(std::string(name)); }
  bool has(std::string_view name) const override { return l_.has(std::string(name)); }
  bool is_tensor(std::string_view name) const override {
    const Arg* a = l_.node().find(std::string(name));
    return a && a->kind == Arg::Kind::kTensor;
  }
  double num(std::string_view name, double fallback) const override {
    return l_.number(std::string(name), fallback);
  }
  std::string str(std::string_view name) const override { return l_.str(std::string(name)); }
  ops::ScalarType type(std::string_view name) const override {
    if (!is_tensor(name)) return ops::ScalarType::kOther;
    return ops::parse_type_name(l_.meta(l_.tensor(std::string(name))).type_name);
  }
  ops::ScalarType out_type() const override {
    return ops::parse_type_name(l_.meta(l_.node().outputs.at(0)).type_name);
  }

 private:
  Lowerer& l_;
};

// An elementwise op: its expression rule as one pointwise op.
void lower_expression(Lowerer& l, const ops::ExprRule& rule) {
  NodeOperands operands(l);
  if (rule.supports && !rule.supports(operands))
    throw NotLowered("arguments the op's rule does not take");
  l.begin();
  rule.build(operands, l.e());
  l.pointwise(l.node().outputs.at(0));
}

// The op library's rule for a node: its lowering, or its expression as one pointwise op.
Rule find_rule(const ops::OpRule* r) {
  if (!r) return Rule();
  if (r->lower) return r->lower;
  if (r->expr.build) return [r](Lowerer& l) { lower_expression(l, r->expr); };
  return Rule();
}

}  // namespace

LoweredGraph lower(const Graph& g, const std::vector<bool>& opaque_nodes,
                   const std::vector<std::string>& kernel_nodes) {
  LoweredGraph out;
  out.graph = g;
  out.root.resize(g.values().size());
  for (size_t v = 0; v < out.root.size(); ++v) out.root[v] = static_cast<int>(v);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const size_t first_op = out.ops.size();
    const size_t values_before = out.graph.values().size();
    std::string reason;
    // Views stay metadata even when a region around them failed: there is nothing to run.
    const ops::OpRule* library = ops::find_op_rule(n.op);
    const Rule rule = find_rule(library);
    const bool forced =
        i < opaque_nodes.size() && opaque_nodes[i] && !(library && library->metadata_only);
    const bool whole = i < kernel_nodes.size() && !kernel_nodes[i].empty();
    if (forced) {
      reason = "its parts do not fit one fused program";
    } else if (whole) {
      reason = kernel_nodes[i];
    } else if (!rule) {
      reason = "no lowering for " + n.op;
    } else {
      try {
        Lowerer l(out, static_cast<int>(i));
        rule(l);
        if (n.op == "aten::copy_" && n.find("self") && n.arg("self").kind == Arg::Kind::kTensor) {
          // The copy's result is the destination's memory.
          out.root.at(static_cast<size_t>(n.outputs.at(0))) =
              out.root.at(static_cast<size_t>(n.arg("self").value));
        }
        continue;
      } catch (const NotLowered& e) {
        reason = e.what();
      } catch (const std::invalid_argument& e) {
        reason = e.what();
      } catch (const std::out_of_range& e) {
        reason = std::string("unexpected arguments: ") + e.what();
      }
    }
    // Drop any partial lowering and keep the node whole: as its op-library program when the
    // library has one the compiler can build (kKernel), else opaque (the eager kernel inside the
    // launch, or the host).
    out.ops.resize(first_op);
    (void)values_before;  // temporaries of a failed lowering stay unused
    Op op;
    const bool kernel = !forced && library && library->build && n.device_kernel &&
                        !library->backend_values && !library->shape_sync;
    op.kind = kernel ? Op::Kind::kKernel : Op::Kind::kOpaque;
    op.node = static_cast<int>(i);
    for (const auto& [name, a] : n.args) {
      if (a.kind == Arg::Kind::kTensor && a.value >= 0) op.inputs.push_back(a.value);
      if (a.kind == Arg::Kind::kTensors) {
        for (int v : a.values) {
          if (v >= 0) op.inputs.push_back(v);
        }
      }
    }
    op.reason = reason;
    if (kernel && !n.outputs.empty()) op.output = n.outputs[0];
    out.ops.push_back(std::move(op));
  }
  return out;
}

}  // namespace neuronsim::kernels::compiler
