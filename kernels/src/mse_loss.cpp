#include "neuronsim/kernels/mse_loss.h"

#include "neuronsim/kernels/expression_sum.h"

namespace neuronsim::kernels {

device_model::Program build_squared_error_sum(const std::string& name, const TensorDesc& a,
                                              const TensorDesc& b, const TensorDesc& out,
                                              float scale, const device_model::CoreParams& core) {
  Expr e;
  const Arg d = e.alu(device_model::AluOp::kSubtract, Arg::input(0), Arg::input(1));
  e.alu(device_model::AluOp::kMultiply, d, d);
  return build_expression_sum(name, {a, b}, e, out, scale, core);
}

}  // namespace neuronsim::kernels
