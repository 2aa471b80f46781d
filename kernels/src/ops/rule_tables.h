#pragma once
// Each op family's rules, one table per file of this folder; registry.cpp joins them.
#include <functional>
#include <string>
#include <vector>

#include "neuronsim/kernels/ops/op_rule.h"

namespace neuronsim::kernels::ops {

std::vector<OpRule> elementwise_expression_rules();  // elementwise_expressions.cpp
std::vector<OpRule> elementwise_program_rules();     // elementwise_programs.cpp
std::vector<OpRule> copy_rules();                    // copy.cpp
std::vector<OpRule> view_rules();                    // views.cpp
std::vector<OpRule> reduction_rules();               // reduction.cpp
std::vector<OpRule> softmax_rules();                 // softmax.cpp
std::vector<OpRule> layer_norm_rules();              // layer_norm.cpp
std::vector<OpRule> matmul_rules();                  // matmul.cpp
std::vector<OpRule> attention_rules();               // attention.cpp
std::vector<OpRule> foreach_rules();                 // foreach.cpp
std::vector<OpRule> group_norm_rules();              // group_norm.cpp
std::vector<OpRule> upsample_rules();                // upsample.cpp
std::vector<OpRule> unfold_rules();                  // unfold.cpp
std::vector<OpRule> pooling_rules();                 // pooling.cpp
std::vector<OpRule> convolution_rules();             // convolution.cpp
std::vector<OpRule> indexing_rules();                // indexing.cpp
std::vector<OpRule> selection_rules();               // selection.cpp
std::vector<OpRule> rearrange_rules();               // rearrange.cpp
std::vector<OpRule> grad_scaler_rules();             // grad_scaler.cpp
std::vector<OpRule> fused_optimizer_rules();         // fused_optimizer.cpp
std::vector<OpRule> recurrent_rules();               // recurrent.cpp
std::vector<OpRule> loss_rules();                    // loss.cpp
std::vector<OpRule> compaction_rules();              // compaction.cpp
std::vector<OpRule> histogram_rules();               // histogram.cpp
std::vector<OpRule> membership_rules();              // membership.cpp
std::vector<OpRule> batch_norm_rules();              // batch_norm.cpp

/// A rule from its facets; the flags keep their defaults (each table sets the ones it needs).
OpRule make_rule(std::string name, std::function<Programs(const OpCall&)> build = nullptr,
                 std::function<bool(const OpCall&)> supports = nullptr,
                 std::function<void(graph::Lowerer&)> lower = nullptr);

/// x ** p for a constant p: the exact cases as multiplies and roots, otherwise the ALU's pow.
Arg constant_power(Expr& e, Arg x, double p);

/// The eager programs of an expression rule: build_elementwise over the call's device tensors.
Programs build_expression(const std::string& name, const ExprRule& rule, const OpCall& call);
/// Whether an expression rule takes an eager call.
bool expression_supports(const ExprRule& rule, const OpCall& call);

}  // namespace neuronsim::kernels::ops
