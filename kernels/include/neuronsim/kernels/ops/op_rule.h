#pragma once
// The op library: for every op the device runs, its rule, written once and read by every
// consumer — the eager backend (programs for one call), the graph compiler (the op's IR inside a
// fused region) and the tools that list what runs natively. An op is added in the file of its
// family under kernels/src/ops/ and nowhere else.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/ops/expr_rule.h"
#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::kernels::graph {
class Lowerer;
}

namespace neuronsim::kernels::ops {

using Programs = std::vector<device_model::Program>;

struct OpRule {
  /// ATen base name: "aten::add" covers add, add_ and add.out.
  std::string name;
  /// The programs of one eager call (derived from `expr` when that is set and this is not).
  std::function<Programs(const OpCall&)> build;
  /// Whether the library handles this call (dtypes, shapes); null: every call. Checked before
  /// anything runs, so an unsupported call takes the CPU fallback instead.
  std::function<bool(const OpCall&)> supports;
  /// Elementwise ops: the expression (eager program and fused pointwise op alike).
  ExprRule expr;
  /// The op's IR in a compiled graph, for ops that are not one expression (reductions,
  /// normalisations, matmuls, views, multi-tensor updates). Throws std::invalid_argument for
  /// arguments it does not take: the node then runs its eager kernel inside the launch.
  std::function<void(graph::Lowerer&)> lower;

  /// A view: the result aliases its first argument's memory and nothing runs (compiled graphs
  /// keep it as metadata; op tracking does not count it as executed).
  bool metadata_only = false;
  /// A data-dependent output size (nonzero, masked_select): the program writes the element count
  /// to OpCall::count() and the host reads it back, a device-to-host sync.
  bool shape_sync = false;
  /// Arguments the op writes that its schema does not mark as written (native_batch_norm's
  /// running statistics).
  std::vector<std::string> writes = {};
  /// Its programs depend only on shapes, strides, dtypes, scalars and addresses (not on tensor
  /// values or state), so a cached program may be reused.
  bool cacheable = false;
  /// The CPU has no kernel for the op (CUDA-only ops): the backend computes its host values, so
  /// a compiled graph keeps the node as an eager node rather than running it on the host CPU.
  bool backend_values = false;
  /// Non-null: the programs model the op's time but not yet its values; ISA mode keeps the
  /// host's values, for the reason given (docs/design.md lists these).
  const char* host_values_reason = nullptr;
};

/// Every rule of the library, in a stable order.
const std::vector<OpRule>& op_rules();
/// The rule of a base name ("aten::add"), or null.
const OpRule* find_op_rule(std::string_view name);

}  // namespace neuronsim::kernels::ops
