// Function of each opcode: dispatches an instruction to its semantics (exec_*.cpp). Data moves
// partition by partition through fp32 (or int64 for the exact integer path) row buffers
// (executor_rows.h), which keeps every opcode a few lines over one iterator.
#include "neuronsim/device_model/executor.h"

#include <array>

#include "exec_ops.h"

namespace neuronsim::device_model {

using namespace exec;

void execute(const Instruction& in, const MemoryMap& mem) {
  using Semantics = void (*)(const Instruction&, const MemoryMap&);
  // By opcode, in isa.h's order; sem_wait and sem_signal move no data.
  static constexpr std::array<Semantics, kOpcodeCount> kSemantics = {exec_matmul,
                                                                     exec_transpose,
                                                                     exec_activation,
                                                                     exec_tensor_tensor,
                                                                     exec_tensor_scalar,
                                                                     exec_tensor_reduce,
                                                                     exec_tensor_copy,
                                                                     exec_iota,
                                                                     exec_memset,
                                                                     exec_select,
                                                                     exec_dma,
                                                                     nullptr,
                                                                     nullptr,
                                                                     exec_rng};
  if (const Semantics f = kSemantics[static_cast<size_t>(in.op)]) f(in, mem);
}

}  // namespace neuronsim::device_model
