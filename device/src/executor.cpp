// Function of each opcode: dispatches an instruction to its semantics (exec_*.cpp). Data moves
// partition by partition through fp32 (or int64 for the exact integer path) row buffers
// (executor_rows.h), which keeps every opcode a few lines over one iterator.
#include "neuronsim/device/executor.h"

#include "exec_ops.h"

namespace neuronsim::device {

using namespace exec;

void execute(const Instruction& in, const MemoryMap& mem) {
  switch (in.op) {
    case Opcode::kMatmul:
      exec_matmul(in, mem);
      return;
    case Opcode::kTranspose:
      exec_transpose(in, mem);
      return;
    case Opcode::kActivation:
      exec_activation(in, mem);
      return;
    case Opcode::kTensorTensor:
      exec_tensor_tensor(in, mem);
      return;
    case Opcode::kTensorScalar:
      exec_tensor_scalar(in, mem);
      return;
    case Opcode::kTensorReduce:
      exec_tensor_reduce(in, mem);
      return;
    case Opcode::kTensorCopy:
      exec_copy(in.dst, in.src0, mem, /*int_exact=*/true);
      return;
    case Opcode::kIota:
      exec_iota(in, mem);
      return;
    case Opcode::kMemset:
      exec_memset(in, mem);
      return;
    case Opcode::kRng:
      exec_rng(in, mem);
      return;
    case Opcode::kSelect:
      exec_select(in, mem);
      return;
    case Opcode::kDmaCopy:
      exec_dma(in, mem);
      return;
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
      return;
  }
}

}  // namespace neuronsim::device
