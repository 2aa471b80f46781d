#pragma once
// How a native op's values come to be, by the process's mode (docs/design.md, "Function and
// timing"), one strategy per mode, each in its file:
// - fast (values_fast.cpp): ATen's CPU kernel on zero-copy CPU views of the device tensors;
// - ISA (values_isa.cpp): the op's programs compute them, into outputs sized by the op's Meta
//   kernel and poisoned (isa_outputs.h).
// The strategy leaves the op's returns on the stack; the programs step (op_programs.h) follows.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <utility>
#include <vector>

#include "aten/native_ops.h"

namespace neuronsim::backend {

/// What the values step leaves for the programs step.
struct ValuesOutcome {
  /// The programs compute the values (ISA mode): they run in full mode.
  bool functional = false;
  /// ISA mode, when the CPU kernel had to size the outputs: what it wrote is restored (mutated
  /// arguments, from these copies) or poisoned (outputs) before the programs run.
  std::vector<std::pair<at::Tensor, at::Tensor>> snapshots;  // (device tensor, saved copy)
  std::vector<at::Tensor> poisoned;
  /// 64-bit data was computed at 32 bits (op tracking counts such runs).
  bool at32 = false;
};

class ValuesMode {
 public:
  virtual ~ValuesMode() = default;
  /// Replaces the op's arguments on `stack` by its returns and puts its device outputs
  /// (returns, flattened) in `inv.outputs`.
  virtual ValuesOutcome compute(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                const NativeOp& native, OpInvocation& inv) const = 0;
};

const ValuesMode& fast_values();
const ValuesMode& isa_values();

/// ISA mode is on for this process (NEURON_SIM_MODE=isa or neuronsim._C._set_isa_mode).
bool isa_mode();

}  // namespace neuronsim::backend
