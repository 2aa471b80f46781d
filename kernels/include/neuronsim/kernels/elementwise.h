#pragma once
// Elementwise kernels: out = expr(in0, in1, ...) with broadcasting (stride-0 inputs). Inputs are
// DMA'd into SBUF as fp32 (or int32 when the expression is integer), the expression runs as
// VectorE ALU, ScalarE activation and VectorE select steps, and the result is DMA'd back with the
// output's dtype (the DMA narrows with round-to-nearest-even). Tiles are double-buffered so loads,
// compute and stores overlap.
#include <string>
#include <vector>

#include "neuronsim/device/isa.h"
#include "neuronsim/device/params.h"
#include "neuronsim/device/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// An operand of an expression step: an input, a previous step's result, or a constant.
struct Arg {
  enum Kind { kInput, kStep, kImm } kind = kImm;
  int index = 0;
  float imm = 0.0f;
  static Arg input(int i) { return {kInput, i, 0.0f}; }
  static Arg step(int i) { return {kStep, i, 0.0f}; }
  static Arg constant(float v) { return {kImm, 0, v}; }
};

struct Step {
  enum Kind { kAlu, kAct, kSelect } kind = kAlu;
  device::AluOp alu = device::AluOp::kAdd;       // kAlu: a op b
  device::ActFunc act = device::ActFunc::kCopy;  // kAct: act(a * scale + bias)
  float scale = 1.0f, bias = 0.0f;
  Arg a, b, c;  // kSelect: a != 0 ? b : c
};

/// The value of the last step is the output. `integer` selects exact int32 arithmetic.
struct Expr {
  std::vector<Step> steps;
  bool integer = false;

  // Builders: each appends a step and returns its Arg.
  Arg alu(device::AluOp op, Arg a, Arg b);
  Arg act(device::ActFunc f, Arg a, float scale = 1.0f, float bias = 0.0f);
  Arg select(Arg pred, Arg on_true, Arg on_false);
};

device::Program build_elementwise(const std::string& name, const std::vector<TensorDesc>& inputs,
                                  const TensorDesc& out, const Expr& expr,
                                  const device::CoreParams& core);

/// One result of a multi-output expression: the value of step `step`, stored to `out`.
struct ExprOutput {
  TensorDesc out;
  int step = 0;
};
/// Several results of one expression in one pass (a fused chain whose intermediates are used
/// elsewhere too). Every output has the same sizes; the first one's layout drives the tiling.
device::Program build_elementwise(const std::string& name, const std::vector<TensorDesc>& inputs,
                                  const std::vector<ExprOutput>& outputs, const Expr& expr,
                                  const device::CoreParams& core);

/// out = in (any strides and dtypes, same shape): HBM-to-HBM DMA through SBUF.
device::Program build_copy(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                           const device::CoreParams& core);
/// Several copies in one kernel (cat, split copies): pairs of (in, out).
device::Program build_copies(const std::string& name,
                             const std::vector<std::pair<TensorDesc, TensorDesc>>& pairs,
                             const device::CoreParams& core);

/// tril/triu over the last two dims: keep (col - row <= diagonal) for lower, >= for upper; the
/// mask comes from a GpSimdE iota of col - row.
device::Program build_triangle(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                               int64_t diagonal, bool lower, const device::CoreParams& core);

/// out[i] = start + i * step for a contiguous 1-D out (GpSimdE iota, VectorE scale).
device::Program build_arange(const std::string& name, const TensorDesc& out, double start,
                             double step, const device::CoreParams& core);

/// out = value everywhere (memset on VectorE, then stores).
device::Program build_fill(const std::string& name, const TensorDesc& out, float value,
                           const device::CoreParams& core);

}  // namespace neuronsim::kernels
