#include "expr_steps.h"

#include "neuronsim/device_model/executor.h"
#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels {

using namespace device_model;

StreamId step_engine(const Step& st) {
  return st.kind == Step::kAct && st.a.kind != Arg::kImm ? kScalar : kVector;
}

void emit_step(ProgramBuilder& b, const Step& st, const AccessPattern& dst,
               const std::function<AccessPattern(const Arg&)>& tensor_arg) {
  const StreamId e = step_engine(st);
  if (st.kind == Step::kAct) {
    if (st.a.kind == Arg::kImm) {
      b.emit(e, isa::memset(dst, apply_activation(st.act, st.a.imm * st.scale + st.bias)));
    } else {
      b.emit(e,
             isa::activation(dst, tensor_arg(st.a), st.act, isa::imm(st.scale), isa::imm(st.bias)));
    }
  } else if (st.kind == Step::kAlu) {
    if (st.a.kind != Arg::kImm && st.b.kind != Arg::kImm) {
      b.emit(e, isa::tensor_tensor(dst, tensor_arg(st.a), tensor_arg(st.b), st.alu));
    } else if (st.a.kind != Arg::kImm) {
      b.emit(e, isa::tensor_scalar(dst, tensor_arg(st.a), st.alu, isa::imm(st.b.imm)));
    } else if (st.b.kind != Arg::kImm) {
      Instruction in = isa::tensor_scalar(dst, tensor_arg(st.b), st.alu, isa::imm(st.a.imm));
      in.reverse0 = true;
      b.emit(e, in);
    } else {
      b.emit(e, isa::memset(dst, apply_alu_float(st.alu, st.a.imm, st.b.imm)));
    }
  } else {  // select
    if (st.a.kind == Arg::kImm) {
      const Arg& pick = st.a.imm != 0.0f ? st.b : st.c;
      if (pick.kind == Arg::kImm)
        b.emit(e, isa::memset(dst, pick.imm));
      else
        b.emit(e, isa::tensor_copy(dst, tensor_arg(pick)));
    } else if (st.b.kind == Arg::kImm) {
      // select needs a tensor on_true: materialise the constant first.
      b.emit(e, isa::memset(dst, st.b.imm));
      if (st.c.kind == Arg::kImm)
        b.emit(e, isa::select(dst, tensor_arg(st.a), dst, st.c.imm));
      else
        b.emit(e, isa::select(dst, tensor_arg(st.a), dst, tensor_arg(st.c)));
    } else if (st.c.kind == Arg::kImm) {
      b.emit(e, isa::select(dst, tensor_arg(st.a), tensor_arg(st.b), st.c.imm));
    } else {
      b.emit(e, isa::select(dst, tensor_arg(st.a), tensor_arg(st.b), tensor_arg(st.c)));
    }
  }
}

}  // namespace neuronsim::kernels
