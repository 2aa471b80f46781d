#pragma once
// Reversed and rotated copies (flip, roll): pure data movement. The source is described with
// the access pattern that reads it in the destination's order (a flipped dim starts at its last
// element with a negated stride; a rolled dim is two blocks swapped), so the copy kernel's DMAs
// do all the work and no compute engine runs.
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out = in reversed along `dims` (same sizes).
device_model::Program build_flip(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, const std::vector<int64_t>& dims,
                                 const device_model::CoreParams& core);

/// out = in rotated by shifts[k] along dims[k] (out[(i + s) mod n] = in[i]); one block copy per
/// combination of the two halves of every rolled dim.
device_model::Program build_roll(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, const std::vector<int64_t>& shifts,
                                 const std::vector<int64_t>& dims,
                                 const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
