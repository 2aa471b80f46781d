#pragma once
// Group norm forward on channels-last data with positions on partitions: each position's C
// channels are one contiguous run, so an image moves in one DMA per 128 positions (the rows-(n,
// g) kernel would move runs of C/G channels, a descriptor each). build_group_norm takes this
// kernel when input and output are both channels-last and an image fits in SBUF.
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/group_norm_io.h"

namespace neuronsim::kernels {

/// Whether one image ([HxW, C] fp32) stays resident in SBUF beside the per-channel tiles.
bool group_norm_positions_fit(const GroupNormShape& s, const device_model::CoreParams& core);

/// io.in and io.out channels-last ([N, HxW, C] in memory); mean/rstd [N, G] dense.
device_model::Program build_group_norm_positions(const std::string& name, const GroupNormIo& io,
                                                 const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
