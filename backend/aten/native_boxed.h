#pragma once
// How a native neuron op runs: check -> values -> programs (docs/design.md, "Function and
// timing"). The check (op_check.h) decides the device or the CPU fallback; the values come from
// the process's mode (op_values.h: fast, ISA); the programs are built or taken from the cache and
// launched through the thread's capture (op_programs.h, op_capture.h: eager, a fused node of a
// compiled graph, an eager node of one).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "aten/cpu_fallback.h"
#include "aten/op_programs.h"

namespace neuronsim::backend {

/// The boxed kernel every native op is registered with.
void native_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace neuronsim::backend
