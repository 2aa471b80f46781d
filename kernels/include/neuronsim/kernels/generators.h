#pragma once
// Tensors generated from their index alone (no input): the identity (eye) and evenly spaced
// values (linspace, logspace). GpSimdE writes the index with an iota, VectorE (and ScalarE for
// logspace's exponential) turns it into the value, and the DMA stores it with the output's dtype.
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out[r][c] = (r == c) for a 2-D out (rows on partitions, 128 per tile).
device_model::Program build_eye(const std::string& name, const TensorDesc& out,
                                const device_model::CoreParams& core);

/// `steps` = out.numel() values from start to end as the CPU computes them: start + i * step for
/// the first half, end - (steps - 1 - i) * step for the second (step = (end - start) / (steps -
/// 1)). With `log_base` > 0 each value v becomes log_base^v (logspace), as exp(v ln base).
device_model::Program build_linspace(const std::string& name, const TensorDesc& out, float start,
                                     float end, float log_base,
                                     const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
