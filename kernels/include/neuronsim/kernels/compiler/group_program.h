#pragma once
// A group of alike flat tile regions (an optimizer's per-parameter updates) as one multi-tensor
// program (kernels/multi_tensor.h), the kernel eager mode's fused optimizers and _foreach_ ops
// run: each region is one tensor group, the tiles of every group flow through one pipeline and
// the regions' scalar operands (a step count, a bias correction) are computed once per group on
// [P, 1] columns.
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/compiler/tile_program.h"

namespace neuronsim::kernels::compiler {

/// `specs` are alike (same_structure) regions of elementwise steps over contiguous full tensors
/// and one-element scalars. Nullopt when a region's instructions have no multi-tensor form.
std::optional<device_model::Program> build_group_multi_tensor(
    const std::string& name, const std::vector<TileProgramSpec>& specs,
    const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::compiler
