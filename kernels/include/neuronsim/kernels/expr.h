#pragma once
// Elementwise expressions: steps over inputs, earlier steps and constants (VectorE ALU ops,
// ScalarE activations, selects). The library's elementwise kernels evaluate them tile by tile;
// the op library writes its elementwise ops as them.
#include <vector>

#include "neuronsim/device_model/isa.h"

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
  device_model::AluOp alu = device_model::AluOp::kAdd;       // kAlu: a op b
  device_model::ActFunc act = device_model::ActFunc::kCopy;  // kAct: act(a * scale + bias)
  float scale = 1.0f, bias = 0.0f;
  Arg a, b, c;  // kSelect: a != 0 ? b : c
};

/// The value of the last step is the output. `integer` selects exact int32 arithmetic.
struct Expr {
  std::vector<Step> steps;
  bool integer = false;

  // Builders: each appends a step and returns its Arg.
  Arg alu(device_model::AluOp op, Arg a, Arg b);
  Arg act(device_model::ActFunc f, Arg a, float scale = 1.0f, float bias = 0.0f);
  Arg select(Arg pred, Arg on_true, Arg on_false);
};

}  // namespace neuronsim::kernels
