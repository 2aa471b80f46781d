#pragma once
// Multi-tensor programs: one launch over a list of tensor groups, as PyTorch's multi_tensor_apply
// does on an accelerator (the _foreach_* ops, the fused optimizers, the GradScaler's unscale).
// Every group runs the same expression:
// - per-element steps over the group's tensors (tiles of up to 128 partitions, double-buffered
//   through SBUF as fp32, or int32 for integer expressions), on VectorE (ALU, select) and ScalarE
//   (activation functions);
// - scalar steps over one-element device tensors (the optimizer step count, a tensor lr, found_inf)
//   and per-group constants, computed once per group on [P, 1] columns and read by the
//   per-element steps as per-partition operands;
// - reductions of a per-element value over all of a group's elements (or of every group): a
//   tensor_reduce per tile, combined per partition on VectorE, then across partitions by a TensorE
//   transpose and one more tensor_reduce, followed by scalar steps on the result (a norm's root).
// Tiles of all groups flow through one pipeline, so a list of many small tensors costs one
// launch, not one per tensor.
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// An operand of a multi-tensor step.
struct MtArg {
  enum Kind {
    kTensor,   // the group's tensors[index], element by element
    kScalar,   // the group's scalars[index]: a one-element device tensor
    kParam,    // the group's params[index]: a constant per group
    kReduced,  // the result of reductions[index]
    kStep,     // the value of steps[index]
    kImm,      // a constant
  } kind = kImm;
  int index = 0;
  float imm = 0.0f;
  static MtArg tensor(int i) { return {kTensor, i, 0.0f}; }
  static MtArg scalar(int i) { return {kScalar, i, 0.0f}; }
  static MtArg param(int i) { return {kParam, i, 0.0f}; }
  static MtArg constant(float v) { return {kImm, 0, v}; }
};

struct MtStep {
  enum Kind { kAlu, kAct, kSelect, kBroadcast } kind = kAlu;
  device_model::AluOp alu = device_model::AluOp::kAdd;       // kAlu: a op b
  device_model::ActFunc act = device_model::ActFunc::kCopy;  // kAct: act(a * scale + bias)
  float scale = 1.0f, bias = 0.0f;
  MtArg a, b, c;  // kSelect: a != 0 ? b : c; kBroadcast: a scalar value as a per-element one
};

struct MtReduction {
  MtArg value;  // a per-element value
  device_model::ReduceOp op = device_model::ReduceOp::kAdd;
  bool across_groups = false;  // one result over every group instead of one per group
};

struct MtExpr {
  std::vector<MtStep> steps;
  std::vector<MtReduction> reductions;
  /// Per-element results: {value, k} stores value into the group's outputs[k].
  std::vector<std::pair<MtArg, int>> stores;
  /// Scalar results: {value, k} stores value into the group's scalar_outputs[k]. A value that
  /// reads an across-groups reduction is stored once, after the last group, into its outputs.
  std::vector<std::pair<MtArg, int>> scalar_stores;
  bool integer = false;  // exact int32 arithmetic (no reductions)

  MtArg alu(device_model::AluOp op, MtArg a, MtArg b);
  MtArg act(device_model::ActFunc f, MtArg a, float scale = 1.0f, float bias = 0.0f);
  MtArg select(MtArg pred, MtArg on_true, MtArg on_false);
  MtArg broadcast(MtArg scalar_value);
  MtArg reduce(MtArg value, device_model::ReduceOp op, bool across_groups = false);
};

/// One group: tensors and outputs share a shape (tensors may broadcast to it).
struct MtGroup {
  std::vector<TensorDesc> tensors, outputs;
  std::vector<TensorDesc> scalars, scalar_outputs;  // one element each
  std::vector<float> params;
};

/// Throws std::invalid_argument for an expression that mixes per-element values with reduction
/// results, or operands a group lacks.
device_model::Program build_multi_tensor(const std::string& name,
                                         const std::vector<MtGroup>& groups, const MtExpr& expr,
                                         const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
