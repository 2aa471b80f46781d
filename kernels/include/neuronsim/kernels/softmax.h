#pragma once
// softmax / log_softmax (and their backward) over one dim. Rows go to partitions; each row's
// columns stream through SBUF in chunks (one pass when they fit).
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

device_model::Program build_softmax(const std::string& name, const TensorDesc& in,
                                    const TensorDesc& out, int64_t dim, bool log,
                                    const device_model::CoreParams& core);

/// softmax: grad_in = y * (g - sum(g * y)); log_softmax: grad_in = g - exp(y) * sum(g).
device_model::Program build_softmax_backward(const std::string& name, const TensorDesc& grad_out,
                                             const TensorDesc& output, const TensorDesc& grad_in,
                                             int64_t dim, bool log,
                                             const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
