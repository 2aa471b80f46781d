#pragma once
// The fused recurrent cells PyTorch calls on an accelerator (_thnn_fused_lstm_cell,
// _thnn_fused_gru_cell and their backwards): the gate projections come from TensorE matmuls
// before the cell; the cell itself is one elementwise pass over [batch, hidden] that reads every
// gate's column block of the [batch, gates * hidden] projections (and the biases, broadcast
// over the batch), runs the sigmoid/tanh on ScalarE and the products on VectorE, and writes the
// state and the workspace the backward reads. Bias gradients are a column sum of the gate
// gradients (the reduction kernel).
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// Gates [B, 4H] in PyTorch's order (input, forget, cell, output); cx, hy, cy [B, H]; biases
/// [4H] (both or neither); workspace [B, 4H] receives the activated gates.
struct LstmCellIo {
  TensorDesc input_gates, hidden_gates, cx;
  std::optional<TensorDesc> input_bias, hidden_bias;
  TensorDesc hy, cy, workspace;
};
device_model::Program build_lstm_cell(const std::string& name, const LstmCellIo& io,
                                      const device_model::CoreParams& core);

/// grad_hy/grad_cy [B, H] (at least one); grad_gates [B, 4H], grad_cx [B, H]; grad_bias [4H]
/// (the column sum of grad_gates) when given.
struct LstmCellBackwardIo {
  std::optional<TensorDesc> grad_hy, grad_cy;
  TensorDesc cx, cy, workspace;
  TensorDesc grad_gates, grad_cx;
  std::optional<TensorDesc> grad_bias;
};
std::vector<device_model::Program> build_lstm_cell_backward(const std::string& name,
                                                            const LstmCellBackwardIo& io,
                                                            const device_model::CoreParams& core);

/// Gates [B, 3H] (reset, update, new); hx, hy [B, H]; workspace [B, 5H] receives (reset,
/// update, new, hx, hidden new-gate projection with its bias), as CUDA's kernel lays it out.
struct GruCellIo {
  TensorDesc input_gates, hidden_gates, hx;
  std::optional<TensorDesc> input_bias, hidden_bias;
  TensorDesc hy, workspace;
};
device_model::Program build_gru_cell(const std::string& name, const GruCellIo& io,
                                     const device_model::CoreParams& core);

/// grad_hy [B, H], workspace [B, 5H]; grad_input_gates/grad_hidden_gates [B, 3H], grad_hx
/// [B, H]; the bias gradients [3H] are their column sums when given.
struct GruCellBackwardIo {
  TensorDesc grad_hy, workspace;
  TensorDesc grad_input_gates, grad_hidden_gates, grad_hx;
  std::optional<TensorDesc> grad_input_bias, grad_hidden_bias;
};
std::vector<device_model::Program> build_gru_cell_backward(const std::string& name,
                                                           const GruCellBackwardIo& io,
                                                           const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
