#include <unordered_map>
#include <utility>

#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

std::vector<OpRule> all_rules() {
  std::vector<OpRule> all;
  // Families whose programs follow from shapes, strides, dtypes and scalars alone may reuse
  // cached programs (indexing, losses with target indices, selection, compaction, histograms
  // and state-reading optimizer kernels build theirs per call).
  struct Family {
    std::vector<OpRule> (*rules)();
    bool cacheable;
  };
  for (const Family& f : {Family{elementwise_expression_rules, true},
                          Family{elementwise_program_rules, true},
                          Family{copy_rules, true},
                          Family{view_rules, true},
                          Family{reduction_rules, true},
                          Family{softmax_rules, true},
                          Family{layer_norm_rules, true},
                          Family{matmul_rules, true},
                          Family{attention_rules, false},
                          Family{foreach_rules, false},
                          Family{group_norm_rules, true},
                          Family{upsample_rules, true},
                          Family{unfold_rules, true},
                          Family{pooling_rules, true},
                          Family{convolution_rules, true},
                          Family{indexing_rules, false},
                          Family{selection_rules, false},
                          Family{rearrange_rules, true},
                          Family{grad_scaler_rules, false},
                          Family{fused_optimizer_rules, false},
                          Family{recurrent_rules, false},
                          Family{loss_rules, false},
                          Family{compaction_rules, false},
                          Family{histogram_rules, false},
                          Family{membership_rules, false},
                          Family{batch_norm_rules, false}}) {
    for (OpRule& r : f.rules()) {
      r.cacheable = r.cacheable || f.cacheable;
      all.push_back(std::move(r));
    }
  }
  for (OpRule& r : all) {
    if (r.expr.build && !r.build) {
      const ExprRule expr = r.expr;
      const std::string name = r.name;
      r.build = [expr, name](const OpCall& call) { return build_expression(name, expr, call); };
      r.supports = [expr](const OpCall& call) { return expression_supports(expr, call); };
    }
  }
  return all;
}

}  // namespace

OpRule make_rule(std::string name, std::function<Programs(const OpCall&)> build,
                 std::function<bool(const OpCall&)> supports,
                 std::function<void(graph::Lowerer&)> lower) {
  OpRule r;
  r.name = std::move(name);
  r.build = std::move(build);
  r.supports = std::move(supports);
  r.lower = std::move(lower);
  return r;
}

const std::vector<OpRule>& op_rules() {
  static const std::vector<OpRule> rules = all_rules();
  return rules;
}

const OpRule* find_op_rule(std::string_view name) {
  static const auto index = [] {
    std::unordered_map<std::string_view, const OpRule*> m;
    for (const OpRule& r : op_rules()) m[r.name] = &r;
    return m;
  }();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace neuronsim::kernels::ops
