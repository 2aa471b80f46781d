// The fused recurrent cells PyTorch picks on an accelerator (RNN.cpp calls them for every
// non-CPU device): _thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backwards. The CPU has
// no kernel for them, so their host values are computed here with CUDA's formulas (fp32
// arithmetic for reduced-precision data, in the order the device program evaluates them); their
// programs are the op library's (kernels/src/ops/recurrent.cpp).
#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include "aten/native_ops.h"

namespace neuronsim::backend {
namespace {

using torch::jit::Stack;

at::Tensor optional_tensor(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor() : at::Tensor();
}

// fp32 arithmetic for every float type but double (computed at 32 bits on the device anyway).
at::Tensor widen(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

void check_floating(const char* op, const at::Tensor& like, std::initializer_list<at::Tensor> ts) {
  TORCH_CHECK(at::isFloatingType(like.scalar_type()), "\"", op, "\" not implemented for '",
              like.scalar_type(), "'");
  for (const at::Tensor& t : ts) {
    TORCH_CHECK(!t.defined() || t.scalar_type() == like.scalar_type(), op,
                ": expected every tensor to have dtype ", like.scalar_type(), ", got ",
                t.scalar_type());
  }
}

// CUDA's checkSizes: gates [B, G], biases [G] (both or neither), the state [B, G / factor].
void check_cell(const char* op, const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& ib,
                const at::Tensor& hb, int64_t factor, const at::Tensor& state) {
  TORCH_CHECK(ig.dim() == 2, op, ": input_gates must be 2-D [batch, ", factor,
              " * hidden], got sizes ", ig.sizes());
  TORCH_CHECK(hg.sizes().equals(ig.sizes()), op, ": hidden_gates of sizes ", hg.sizes(),
              " must match input_gates ", ig.sizes());
  TORCH_CHECK(ib.defined() == hb.defined(), op,
              ": give both input_bias and hidden_bias or neither");
  if (ib.defined()) {
    TORCH_CHECK(ib.dim() == 1 && ib.numel() == ig.size(1), op, ": input_bias must be [", ig.size(1),
                "], got sizes ", ib.sizes());
    TORCH_CHECK(hb.sizes().equals(ib.sizes()), op, ": hidden_bias of sizes ", hb.sizes(),
                " must match input_bias ", ib.sizes());
  }
  TORCH_CHECK(ig.size(1) % factor == 0 && state.dim() == 2 && state.size(0) == ig.size(0) &&
                  state.size(1) * factor == ig.size(1),
              op, ": the state must be [", ig.size(0), ", ", ig.size(1) / factor,
              "] for gates of sizes ", ig.sizes(), ", got ", state.sizes());
  check_floating(op, ig, {hg, ib, hb, state});
}

// sum of a gate's projections and biases, as the device program adds them.
at::Tensor pre_activation(const std::vector<at::Tensor>& x, const std::vector<at::Tensor>& h,
                          const std::vector<at::Tensor>& bx, const std::vector<at::Tensor>& bh,
                          size_t k) {
  at::Tensor s = x[k] + h[k];
  if (!bx.empty()) s = (s + bx[k]) + bh[k];
  return s;
}

std::vector<at::Tensor> blocks(const at::Tensor& t, int64_t n) {
  if (!t.defined()) return {};
  return widen(t).chunk(n, t.dim() - 1);
}

at::Tensor sigmoid_slope(const at::Tensor& a) {
  return a * (1 - a);
}

at::Tensor one_minus_square(const at::Tensor& a) {
  return 1 - a * a;
}

void lstm_cell_values(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::pop(*stack, 5);
  const at::Tensor ig = a[0].toTensor(), hg = a[1].toTensor(), cx = a[2].toTensor();
  const at::Tensor ib = optional_tensor(a[3]), hb = optional_tensor(a[4]);
  check_cell("_thnn_fused_lstm_cell", ig, hg, ib, hb, 4, cx);
  const auto x = blocks(ig, 4), h = blocks(hg, 4), bx = blocks(ib, 4), bh = blocks(hb, 4);
  const at::Tensor i = at::sigmoid(pre_activation(x, h, bx, bh, 0));
  const at::Tensor f = at::sigmoid(pre_activation(x, h, bx, bh, 1));
  const at::Tensor g = at::tanh(pre_activation(x, h, bx, bh, 2));
  const at::Tensor o = at::sigmoid(pre_activation(x, h, bx, bh, 3));
  const at::Tensor cy = f * widen(cx) + i * g;
  const at::Tensor hy = o * at::tanh(cy);
  const auto dt = ig.scalar_type();
  torch::jit::push(*stack, hy.to(dt), cy.to(dt), at::cat({i, f, g, o}, 1).to(dt));
}

void lstm_cell_backward_values(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::pop(*stack, 6);
  const at::Tensor grad_hy = optional_tensor(a[0]), grad_cy = optional_tensor(a[1]);
  const at::Tensor cx = a[2].toTensor(), cy = a[3].toTensor(), ws = a[4].toTensor();
  const bool has_bias = a[5].toBool();
  if (!grad_hy.defined() && !grad_cy.defined()) {
    torch::jit::push(*stack, at::Tensor(), at::Tensor(), at::Tensor());
    return;
  }
  const char* op = "_thnn_fused_lstm_cell_backward_impl";
  const at::Tensor& grad = grad_hy.defined() ? grad_hy : grad_cy;
  TORCH_CHECK(grad.dim() == 2, op, ": the gradients must be 2-D [batch, hidden], got sizes ",
              grad.sizes());
  for (const at::Tensor& t : {grad_hy, grad_cy, cx, cy}) {
    TORCH_CHECK(!t.defined() || t.sizes().equals(grad.sizes()), op, ": expected sizes ",
                grad.sizes(), " for the gradients, cx and cy, got ", t.sizes());
  }
  TORCH_CHECK(ws.dim() == 2 && ws.size(0) == grad.size(0) && ws.size(1) == 4 * grad.size(1), op,
              ": workspace must be [", grad.size(0), ", ", 4 * grad.size(1), "], got sizes ",
              ws.sizes());
  check_floating(op, ws, {grad_hy, grad_cy, cx, cy});
  const auto w = blocks(ws, 4);
  const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  at::Tensor grad_o = at::zeros_like(o), gcell = grad_cy.defined() ? widen(grad_cy) : grad_o;
  if (grad_hy.defined()) {
    const at::Tensor go = widen(grad_hy), tc = at::tanh(widen(cy));
    grad_o = (go * tc) * sigmoid_slope(o);
    const at::Tensor through_hy = (go * o) * one_minus_square(tc);
    gcell = grad_cy.defined() ? through_hy + widen(grad_cy) : through_hy;
  }
  const at::Tensor grad_i = (gcell * g) * sigmoid_slope(i);
  const at::Tensor grad_f = (gcell * widen(cx)) * sigmoid_slope(f);
  const at::Tensor grad_c = (gcell * i) * one_minus_square(g);
  const auto dt = ws.scalar_type();
  const at::Tensor grad_gates = at::cat({grad_i, grad_f, grad_c, grad_o}, 1).to(dt);
  torch::jit::push(*stack, grad_gates, (gcell * f).to(dt),
                   has_bias ? grad_gates.sum(0) : at::Tensor());
}

void gru_cell_values(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::pop(*stack, 5);
  const at::Tensor ig = a[0].toTensor(), hg = a[1].toTensor(), hx = a[2].toTensor();
  const at::Tensor ib = optional_tensor(a[3]), hb = optional_tensor(a[4]);
  check_cell("_thnn_fused_gru_cell", ig, hg, ib, hb, 3, hx);
  const auto x = blocks(ig, 3), h = blocks(hg, 3), bx = blocks(ib, 3), bh = blocks(hb, 3);
  const bool bias = ib.defined();
  const at::Tensor r = at::sigmoid(pre_activation(x, h, bx, bh, 0));
  const at::Tensor z = at::sigmoid(pre_activation(x, h, bx, bh, 1));
  const at::Tensor hn = bias ? h[2] + bh[2] : h[2];
  const at::Tensor xn = bias ? x[2] + bx[2] : x[2];
  const at::Tensor n = at::tanh(xn + r * hn);
  const at::Tensor hxw = widen(hx);
  const at::Tensor hy = n + z * (hxw - n);
  const auto dt = ig.scalar_type();
  torch::jit::push(*stack, hy.to(dt), at::cat({r, z, n, hxw, hn}, 1).to(dt));
}

void gru_cell_backward_values(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::pop(*stack, 3);
  const at::Tensor grad_hy = a[0].toTensor(), ws = a[1].toTensor();
  const bool has_bias = a[2].toBool();
  const char* op = "_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2, op, ": grad_hy must be 2-D [batch, hidden], got sizes ",
              grad_hy.sizes());
  TORCH_CHECK(ws.dim() == 2 && ws.size(0) == grad_hy.size(0) && ws.size(1) == 5 * grad_hy.size(1),
              op, ": workspace must be [", grad_hy.size(0), ", ", 5 * grad_hy.size(1),
              "], got sizes ", ws.sizes());
  check_floating(op, ws, {grad_hy});
  const auto w = blocks(ws, 5);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor go = widen(grad_hy);
  const at::Tensor grad_z = (go * (hx - n)) * sigmoid_slope(z);
  const at::Tensor grad_hx = go * z;
  const at::Tensor grad_n = (go * (1 - z)) * one_minus_square(n);
  const at::Tensor grad_hn = grad_n * r;
  const at::Tensor grad_r = (grad_n * hn) * sigmoid_slope(r);
  const auto dt = ws.scalar_type();
  const at::Tensor gi = at::cat({grad_r, grad_z, grad_n}, 1).to(dt);
  const at::Tensor gh = at::cat({grad_r, grad_z, grad_hn}, 1).to(dt);
  torch::jit::push(*stack, gi, gh, grad_hx.to(dt), has_bias ? gi.sum(0) : at::Tensor(),
                   has_bias ? gh.sum(0) : at::Tensor());
}

}  // namespace

HostValueTable recurrent_host_values() {
  return {{"aten::_thnn_fused_lstm_cell", lstm_cell_values},
          {"aten::_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward_values},
          {"aten::_thnn_fused_gru_cell", gru_cell_values},
          {"aten::_thnn_fused_gru_cell_backward", gru_cell_backward_values}};
}

}  // namespace neuronsim::backend
