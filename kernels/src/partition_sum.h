#pragma once
// The last step of the kernels that count or sum into one element (nonzero, unique, the
// expression sums): per-partition partials, a [P, 1] fp32 column in SBUF, summed across
// partitions.
#include <cstdint>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

/// total (one fp32 element in SBUF) = the sum of `column` over its partitions: the column,
/// once VectorE has written it, transposed on TensorE into a PSUM row in `bank` and reduced on
/// VectorE.
void emit_partition_sum(ProgramBuilder& b, const device_model::AccessPattern& column, uint64_t bank,
                        const device_model::AccessPattern& total);

}  // namespace neuronsim::kernels
