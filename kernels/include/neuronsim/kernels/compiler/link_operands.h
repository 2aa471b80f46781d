#pragma once
// for_each_operand (link.h): which access patterns of an instruction are live for its opcode
// (device_model/docs/ISA.md lists the fields each opcode reads).
#include "neuronsim/device_model/isa.h"

namespace neuronsim::kernels::compiler {

template <typename Fn>
void for_each_operand(device_model::Instruction& in, Fn&& fn) {
  using device_model::Opcode;
  switch (in.op) {
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
      return;
    case Opcode::kIota:
    case Opcode::kMemset:
    case Opcode::kRng:
      fn(in.dst, true);
      return;
    case Opcode::kMatmul:
    case Opcode::kTensorTensor:
      fn(in.dst, true);
      fn(in.src0, false);
      fn(in.src1, false);
      return;
    case Opcode::kSelect:
      fn(in.dst, true);
      fn(in.src0, false);
      fn(in.src1, false);
      if (in.has_src2) fn(in.src2, false);
      return;
    case Opcode::kActivation:
    case Opcode::kTensorScalar:
      fn(in.dst, true);
      fn(in.src0, false);
      if (in.operand0.from_ap) fn(in.operand0.ap, false);
      if (in.operand1.from_ap) fn(in.operand1.ap, false);
      if (in.has_acc_dst) fn(in.acc_dst, true);
      return;
    case Opcode::kTranspose:
    case Opcode::kTensorReduce:
    case Opcode::kTensorCopy:
    case Opcode::kDmaCopy:
      fn(in.dst, true);
      fn(in.src0, false);
      return;
  }
}

}  // namespace neuronsim::kernels::compiler
