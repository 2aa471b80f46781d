// A tile region of elementwise steps only runs as the library's elementwise kernel: its tiling
// folds dims, handles any operand layout (transposed inputs go through TensorE) and stores
// every result the region leaves in one pass.
#include <map>

#include "neuronsim/kernels/compiler/tile_program.h"

namespace neuronsim::kernels::compiler {

std::optional<device_model::Program> build_pointwise_program(const TileProgramSpec& spec,
                                                             const device_model::CoreParams& core) {
  using Kind = TileInstr::Kind;
  for (const TileInstr& in : spec.instrs) {
    if (in.kind == Kind::kStep && in.space != Space::kFull) return std::nullopt;
    if (in.kind != Kind::kLoad && in.kind != Kind::kStep && in.kind != Kind::kStore)
      return std::nullopt;
  }
  std::vector<TensorDesc> inputs;
  std::map<int, int> input_of, step_of;  // instruction -> input / expression step
  Expr e;
  auto arg_of = [&](const kernels::Arg& a) {
    if (a.kind != kernels::Arg::kStep) return a;
    if (input_of.count(a.index)) return kernels::Arg::input(input_of.at(a.index));
    return kernels::Arg::step(step_of.at(a.index));
  };
  std::vector<ExprOutput> outputs;
  for (size_t i = 0; i < spec.instrs.size(); ++i) {
    const TileInstr& in = spec.instrs[i];
    if (in.kind == Kind::kLoad) {
      const TileOperand& o = spec.operands.at(static_cast<size_t>(in.operand));
      input_of[static_cast<int>(i)] = static_cast<int>(inputs.size());
      inputs.push_back(TensorDesc{o.address, o.dtype, spec.shape, o.strides});
    } else if (in.kind == Kind::kStep) {
      Step st = in.step;
      st.a = arg_of(st.a);
      st.b = arg_of(st.b);
      st.c = arg_of(st.c);
      e.steps.push_back(st);
      step_of[static_cast<int>(i)] = static_cast<int>(e.steps.size()) - 1;
    } else {
      const TileOperand& o = spec.operands.at(static_cast<size_t>(in.operand));
      int step;
      if (step_of.count(in.src)) {
        step = step_of.at(in.src);
      } else {  // storing a loaded value as it is (a copy)
        e.alu(device_model::AluOp::kBypass, kernels::Arg::input(input_of.at(in.src)),
              kernels::Arg::constant(0));
        step = static_cast<int>(e.steps.size()) - 1;
      }
      outputs.push_back({TensorDesc{o.address, o.dtype, spec.shape, o.strides}, step});
    }
  }
  if (outputs.empty() || e.steps.empty()) return std::nullopt;
  return build_elementwise(spec.name, inputs, outputs, e, core);
}

}  // namespace neuronsim::kernels::compiler
