#include "neuronsim/kernels/recurrent.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/dtype.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/reduction.h"

namespace neuronsim::kernels {

using namespace device_model;

namespace {

// Column block k of width h of a [B, G * h] matrix, or of a [G * h] bias.
TensorDesc block(const TensorDesc& t, int64_t k, int64_t h) {
  TensorDesc b = t;
  const int64_t d = t.dim() - 1;
  b.address = t.address + static_cast<uint64_t>(k * h * t.strides[d]) * dtype_size(t.dtype);
  b.sizes[d] = h;
  return b;
}

void check_matrix(const std::string& name, const char* what, const TensorDesc& t, int64_t rows,
                  int64_t cols) {
  if (t.dim() != 2 || t.sizes[0] != rows || t.sizes[1] != cols) {
    throw std::invalid_argument(
        fmt::format("{}: {} must be [{}, {}], got {}", name, what, rows, cols, t.to_string()));
  }
}

// The [B, H] of a cell's state and the checks every gate operand shares.
struct CellShape {
  int64_t batch = 0, hidden = 0;
};

CellShape cell_shape(const std::string& name, const TensorDesc& state, int64_t gates,
                     const TensorDesc& input_gates, const TensorDesc& hidden_gates,
                     const std::optional<TensorDesc>& input_bias,
                     const std::optional<TensorDesc>& hidden_bias) {
  if (state.dim() != 2) {
    throw std::invalid_argument(
        fmt::format("{}: the state must be [batch, hidden], got {}", name, state.to_string()));
  }
  const CellShape s{state.sizes[0], state.sizes[1]};
  check_matrix(name, "input_gates", input_gates, s.batch, gates * s.hidden);
  check_matrix(name, "hidden_gates", hidden_gates, s.batch, gates * s.hidden);
  if (input_bias.has_value() != hidden_bias.has_value()) {
    throw std::invalid_argument(fmt::format("{}: give both biases or neither", name));
  }
  for (const auto* b : {&input_bias, &hidden_bias}) {
    if (*b && ((*b)->dim() != 1 || (*b)->sizes[0] != gates * s.hidden)) {
      throw std::invalid_argument(fmt::format("{}: a bias must be [{}], got {}", name,
                                              gates * s.hidden, (*b)->to_string()));
    }
  }
  return s;
}

// Inputs of a cell's forward pass: gate k's pre-activation sums the input and hidden
// projections and both biases, in CUDA's order ((x + h) + b_ih) + b_hh.
struct GateInputs {
  std::vector<TensorDesc> inputs;
  int gates = 0;
  bool bias = false;
  Arg x(int k) const { return Arg::input(k); }
  Arg h(int k) const { return Arg::input(gates + k); }
  Arg bx(int k) const { return Arg::input(2 * gates + k); }
  Arg bh(int k) const { return Arg::input(3 * gates + k); }
};

GateInputs gate_inputs(const TensorDesc& input_gates, const TensorDesc& hidden_gates,
                       const std::optional<TensorDesc>& input_bias,
                       const std::optional<TensorDesc>& hidden_bias, int gates, int64_t hidden) {
  GateInputs g;
  g.gates = gates;
  g.bias = input_bias.has_value();
  for (const TensorDesc* t : {&input_gates, &hidden_gates}) {
    for (int k = 0; k < gates; ++k) g.inputs.push_back(block(*t, k, hidden));
  }
  if (g.bias) {
    for (const TensorDesc* t : {&*input_bias, &*hidden_bias}) {
      for (int k = 0; k < gates; ++k) g.inputs.push_back(block(*t, k, hidden));
    }
  }
  return g;
}

// sum(x_k, h_k [, b_ih_k, b_hh_k]) for gate k.
Arg pre_activation(Expr& e, const GateInputs& g, int k) {
  Arg s = e.alu(AluOp::kAdd, g.x(k), g.h(k));
  if (g.bias) {
    s = e.alu(AluOp::kAdd, s, g.bx(k));
    s = e.alu(AluOp::kAdd, s, g.bh(k));
  }
  return s;
}

// 1 - a * a (the tanh derivative from its value).
Arg one_minus_square(Expr& e, Arg a) {
  return e.act(ActFunc::kCopy, e.alu(AluOp::kMultiply, a, a), -1.0f, 1.0f);
}

// a * (1 - a) (the sigmoid derivative from its value).
Arg sigmoid_slope(Expr& e, Arg a) {
  return e.alu(AluOp::kMultiply, a, e.act(ActFunc::kCopy, a, -1.0f, 1.0f));
}

// The column sum of a [B, N] gradient into a [N] bias gradient.
Program column_sum(const std::string& name, const TensorDesc& grad, const TensorDesc& out,
                   const CoreParams& core) {
  ReduceSpec spec;
  spec.dims = {0};
  return build_reduce(name + " (bias grad)", grad, out, spec, core);
}

}  // namespace

Program build_lstm_cell(const std::string& name, const LstmCellIo& io, const CoreParams& core) {
  const CellShape s =
      cell_shape(name, io.cx, 4, io.input_gates, io.hidden_gates, io.input_bias, io.hidden_bias);
  check_matrix(name, "hy", io.hy, s.batch, s.hidden);
  check_matrix(name, "cy", io.cy, s.batch, s.hidden);
  check_matrix(name, "workspace", io.workspace, s.batch, 4 * s.hidden);
  GateInputs g =
      gate_inputs(io.input_gates, io.hidden_gates, io.input_bias, io.hidden_bias, 4, s.hidden);
  const Arg cx = Arg::input(static_cast<int>(g.inputs.size()));
  g.inputs.push_back(io.cx);

  Expr e;
  Arg gate[4];
  for (int k = 0; k < 4; ++k) {
    gate[k] = e.act(k == 2 ? ActFunc::kTanh : ActFunc::kSigmoid, pre_activation(e, g, k));
  }
  const Arg cy = e.alu(AluOp::kAdd, e.alu(AluOp::kMultiply, gate[1], cx),
                       e.alu(AluOp::kMultiply, gate[0], gate[2]));
  const Arg hy = e.alu(AluOp::kMultiply, gate[3], e.act(ActFunc::kTanh, cy));

  std::vector<ExprOutput> outs{{io.hy, hy.index}, {io.cy, cy.index}};
  for (int k = 0; k < 4; ++k) outs.push_back({block(io.workspace, k, s.hidden), gate[k].index});
  return build_elementwise(name, g.inputs, outs, e, core);
}

std::vector<Program> build_lstm_cell_backward(const std::string& name, const LstmCellBackwardIo& io,
                                              const CoreParams& core) {
  if (!io.grad_hy && !io.grad_cy) {
    throw std::invalid_argument(fmt::format("{}: needs grad_hy or grad_cy", name));
  }
  if (io.cx.dim() != 2) {
    throw std::invalid_argument(
        fmt::format("{}: cx must be [batch, hidden], got {}", name, io.cx.to_string()));
  }
  const int64_t batch = io.cx.sizes[0], hidden = io.cx.sizes[1];
  for (const auto& [what, t] : {std::pair{"grad_hy", io.grad_hy}, std::pair{"grad_cy", io.grad_cy},
                                std::pair{"cy", std::optional<TensorDesc>(io.cy)},
                                std::pair{"grad_cx", std::optional<TensorDesc>(io.grad_cx)}}) {
    if (t) check_matrix(name, what, *t, batch, hidden);
  }
  check_matrix(name, "workspace", io.workspace, batch, 4 * hidden);
  check_matrix(name, "grad_gates", io.grad_gates, batch, 4 * hidden);

  std::vector<TensorDesc> in;
  for (int k = 0; k < 4; ++k) in.push_back(block(io.workspace, k, hidden));
  in.push_back(io.cx);
  in.push_back(io.cy);
  const Arg ig = Arg::input(0), fg = Arg::input(1), cg = Arg::input(2), og = Arg::input(3);
  const Arg cx = Arg::input(4), cy = Arg::input(5);
  std::optional<Arg> go, gc;
  if (io.grad_hy) {
    go = Arg::input(static_cast<int>(in.size()));
    in.push_back(*io.grad_hy);
  }
  if (io.grad_cy) {
    gc = Arg::input(static_cast<int>(in.size()));
    in.push_back(*io.grad_cy);
  }

  Expr e;
  // Through hy = o * tanh(cy): the output gate and the cell state's gradient.
  // No grad_hy: a zero output-gate gradient (a VectorE memset; ScalarE has no memset).
  Arg grad_o = e.alu(AluOp::kAdd, Arg::constant(0.0f), Arg::constant(0.0f));
  Arg gcell = gc ? *gc : Arg::constant(0.0f);
  if (go) {
    const Arg tc = e.act(ActFunc::kTanh, cy);
    grad_o = e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, *go, tc), sigmoid_slope(e, og));
    const Arg through_hy =
        e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, *go, og), one_minus_square(e, tc));
    gcell = gc ? e.alu(AluOp::kAdd, through_hy, *gc) : through_hy;
  }
  // Through cy = f * cx + i * g.
  const Arg grad_i =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, gcell, cg), sigmoid_slope(e, ig));
  const Arg grad_f =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, gcell, cx), sigmoid_slope(e, fg));
  const Arg grad_c =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, gcell, ig), one_minus_square(e, cg));
  const Arg grad_cx = e.alu(AluOp::kMultiply, gcell, fg);

  const Arg grads[4] = {grad_i, grad_f, grad_c, grad_o};
  std::vector<ExprOutput> outs;
  for (int k = 0; k < 4; ++k) outs.push_back({block(io.grad_gates, k, hidden), grads[k].index});
  outs.push_back({io.grad_cx, grad_cx.index});
  std::vector<Program> programs{build_elementwise(name, in, outs, e, core)};
  if (io.grad_bias) programs.push_back(column_sum(name, io.grad_gates, *io.grad_bias, core));
  return programs;
}

Program build_gru_cell(const std::string& name, const GruCellIo& io, const CoreParams& core) {
  const CellShape s =
      cell_shape(name, io.hx, 3, io.input_gates, io.hidden_gates, io.input_bias, io.hidden_bias);
  check_matrix(name, "hy", io.hy, s.batch, s.hidden);
  check_matrix(name, "workspace", io.workspace, s.batch, 5 * s.hidden);
  GateInputs g =
      gate_inputs(io.input_gates, io.hidden_gates, io.input_bias, io.hidden_bias, 3, s.hidden);
  const Arg hx = Arg::input(static_cast<int>(g.inputs.size()));
  g.inputs.push_back(io.hx);

  Expr e;
  const Arg rg = e.act(ActFunc::kSigmoid, pre_activation(e, g, 0));
  const Arg ig = e.act(ActFunc::kSigmoid, pre_activation(e, g, 1));
  // The new gate: tanh(x_n + b_in + r * (h_n + b_hn)).
  const Arg hn = g.bias ? e.alu(AluOp::kAdd, g.h(2), g.bh(2)) : e.act(ActFunc::kCopy, g.h(2));
  Arg xn = g.bias ? e.alu(AluOp::kAdd, g.x(2), g.bx(2)) : g.x(2);
  const Arg ng = e.act(ActFunc::kTanh, e.alu(AluOp::kAdd, xn, e.alu(AluOp::kMultiply, rg, hn)));
  // hy = n + z * (hx - n).
  const Arg hy =
      e.alu(AluOp::kAdd, ng, e.alu(AluOp::kMultiply, ig, e.alu(AluOp::kSubtract, hx, ng)));
  const Arg hx_copy = e.act(ActFunc::kCopy, hx);

  std::vector<ExprOutput> outs{{io.hy, hy.index}};
  const Arg saved[5] = {rg, ig, ng, hx_copy, hn};
  for (int k = 0; k < 5; ++k) outs.push_back({block(io.workspace, k, s.hidden), saved[k].index});
  return build_elementwise(name, g.inputs, outs, e, core);
}

std::vector<Program> build_gru_cell_backward(const std::string& name, const GruCellBackwardIo& io,
                                             const CoreParams& core) {
  if (io.grad_hy.dim() != 2) {
    throw std::invalid_argument(
        fmt::format("{}: grad_hy must be [batch, hidden], got {}", name, io.grad_hy.to_string()));
  }
  const int64_t batch = io.grad_hy.sizes[0], hidden = io.grad_hy.sizes[1];
  check_matrix(name, "workspace", io.workspace, batch, 5 * hidden);
  check_matrix(name, "grad_input_gates", io.grad_input_gates, batch, 3 * hidden);
  check_matrix(name, "grad_hidden_gates", io.grad_hidden_gates, batch, 3 * hidden);
  check_matrix(name, "grad_hx", io.grad_hx, batch, hidden);
  if (io.grad_input_bias.has_value() != io.grad_hidden_bias.has_value()) {
    throw std::invalid_argument(fmt::format("{}: give both bias gradients or neither", name));
  }

  std::vector<TensorDesc> in;
  for (int k = 0; k < 5; ++k) in.push_back(block(io.workspace, k, hidden));
  in.push_back(io.grad_hy);
  const Arg rg = Arg::input(0), ig = Arg::input(1), ng = Arg::input(2), hx = Arg::input(3),
            hn = Arg::input(4), go = Arg::input(5);

  Expr e;
  const Arg grad_i =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, go, e.alu(AluOp::kSubtract, hx, ng)),
            sigmoid_slope(e, ig));
  const Arg grad_hx = e.alu(AluOp::kMultiply, go, ig);
  const Arg grad_n =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, go, e.act(ActFunc::kCopy, ig, -1.0f, 1.0f)),
            one_minus_square(e, ng));
  const Arg grad_hn = e.alu(AluOp::kMultiply, grad_n, rg);
  const Arg grad_r =
      e.alu(AluOp::kMultiply, e.alu(AluOp::kMultiply, grad_n, hn), sigmoid_slope(e, rg));

  std::vector<ExprOutput> outs;
  const Arg to_input[3] = {grad_r, grad_i, grad_n}, to_hidden[3] = {grad_r, grad_i, grad_hn};
  for (int k = 0; k < 3; ++k) {
    outs.push_back({block(io.grad_input_gates, k, hidden), to_input[k].index});
    outs.push_back({block(io.grad_hidden_gates, k, hidden), to_hidden[k].index});
  }
  outs.push_back({io.grad_hx, grad_hx.index});
  std::vector<Program> programs{build_elementwise(name, in, outs, e, core)};
  if (io.grad_input_bias) {
    programs.push_back(column_sum(name, io.grad_input_gates, *io.grad_input_bias, core));
    programs.push_back(column_sum(name, io.grad_hidden_gates, *io.grad_hidden_bias, core));
  }
  return programs;
}

}  // namespace neuronsim::kernels
