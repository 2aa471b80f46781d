#pragma once
// The function of every instruction: what it computes on SBUF/PSUM/HBM data. No timing here.
// Instructions are assumed validated (validator.h); the executor trusts shapes and bounds.
#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/memory.h"

namespace neuronsim::device_model {

/// Applies one data instruction to memory. Sync instructions are no-ops here.
void execute(const Instruction& inst, const MemoryMap& mem);

/// Scalar helpers, exposed so reference tests can state the semantics independently.
float apply_alu_float(AluOp op, float a, float b);
int64_t apply_alu_int(AluOp op, int64_t a, int64_t b);
float apply_activation(ActFunc f, float x);

}  // namespace neuronsim::device_model
