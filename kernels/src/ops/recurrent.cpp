// The fused recurrent cells (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backwards):
// the kernel library's cell programs (kernels/recurrent.h). The CPU has no kernel for them: the
// backend computes their host values with CUDA's formulas (backend/aten/recurrent.cpp).
#include <optional>

#include "neuronsim/kernels/recurrent.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

std::optional<TensorDesc> described(const TensorArg& t) {
  if (!t.defined) return std::nullopt;
  return t.desc;
}

std::optional<TensorDesc> arg_desc(const OpCall& call, const char* name) {
  return described(call.tensor(name));
}

Programs lstm_cell(const OpCall& call) {
  if (call.output(0).numel() == 0) return {};
  LstmCellIo io{call.tensor(0).desc,           call.tensor(1).desc,
                call.tensor(2).desc,           arg_desc(call, "input_bias"),
                arg_desc(call, "hidden_bias"), call.output(0).desc,
                call.output(1).desc,           call.output(2).desc};
  return {build_lstm_cell(call.name(), io, call.core())};
}

Programs lstm_cell_backward(const OpCall& call) {
  const TensorArg grad_gates = call.output(0);
  if (!grad_gates.defined || grad_gates.numel() == 0) return {};
  LstmCellBackwardIo io{arg_desc(call, "grad_hy"), arg_desc(call, "grad_cy"), call.tensor(2).desc,
                        call.tensor(3).desc,       call.tensor(4).desc,       grad_gates.desc,
                        call.output(1).desc,       described(call.output(2))};
  return build_lstm_cell_backward(call.name(), io, call.core());
}

Programs gru_cell(const OpCall& call) {
  if (call.output(0).numel() == 0) return {};
  GruCellIo io{call.tensor(0).desc,          call.tensor(1).desc,           call.tensor(2).desc,
               arg_desc(call, "input_bias"), arg_desc(call, "hidden_bias"), call.output(0).desc,
               call.output(1).desc};
  return {build_gru_cell(call.name(), io, call.core())};
}

Programs gru_cell_backward(const OpCall& call) {
  if (call.output(2).numel() == 0) return {};
  GruCellBackwardIo io{call.tensor(0).desc,      call.tensor(1).desc, call.output(0).desc,
                       call.output(1).desc,      call.output(2).desc, described(call.output(3)),
                       described(call.output(4))};
  return build_gru_cell_backward(call.name(), io, call.core());
}

}  // namespace

std::vector<OpRule> recurrent_rules() {
  std::vector<OpRule> ops;
  for (const auto& [name, build] :
       std::initializer_list<std::pair<const char*, Programs (*)(const OpCall&)>>{
           {"aten::_thnn_fused_lstm_cell", lstm_cell},
           {"aten::_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward},
           {"aten::_thnn_fused_gru_cell", gru_cell},
           {"aten::_thnn_fused_gru_cell_backward", gru_cell_backward}}) {
    OpRule r;
    r.name = name;
    r.build = build;
    r.backend_values = true;  // the CPU has no kernel for the fused cells
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
