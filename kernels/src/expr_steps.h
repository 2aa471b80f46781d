#pragma once
// One step of an elementwise expression as instructions, shared by the kernels that evaluate
// expressions tile by tile in SBUF (elementwise, expression sums). The caller allocates the
// buffers and orders the engines; this only picks the engine and emits the step.
#include <functional>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/kernels/expr.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

/// The engine a step runs on: ScalarE for activations of a tensor, VectorE otherwise (ScalarE
/// has no memset: an activation of a constant folds on the host and VectorE materialises it).
device_model::StreamId step_engine(const Step& st);

/// Emits `st` into `dst` on `step_engine(st)`; `tensor_arg` gives the tile of an input or of an
/// earlier step.
void emit_step(ProgramBuilder& b, const Step& st, const device_model::AccessPattern& dst,
               const std::function<device_model::AccessPattern(const Arg&)>& tensor_arg);

}  // namespace neuronsim::kernels
