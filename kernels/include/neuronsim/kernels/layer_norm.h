#pragma once
// Layer norm over the trailing dims of any strided tensor (forward with optional affine
// parameters and mean/rstd outputs, and backward). Rows go to partitions; each row's columns
// stream through SBUF in chunks (one pass when they fit).
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// in viewed as [rows, D]; weight/bias [D]; mean/rstd [rows] (fp32).
struct LayerNormIo {
  TensorDesc in, out;
  std::optional<TensorDesc> weight, bias, mean, rstd;
  int64_t normalized_dims = 1;
  float eps = 1e-5f;
};
device_model::Program build_layer_norm(const std::string& name, const LayerNormIo& io,
                                       const device_model::CoreParams& core);

struct LayerNormBackwardIo {
  TensorDesc grad_out, in, mean, rstd;
  std::optional<TensorDesc> weight, grad_in, grad_weight, grad_bias;
  int64_t normalized_dims = 1;
};
device_model::Program build_layer_norm_backward(const std::string& name,
                                                const LayerNormBackwardIo& io,
                                                const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
