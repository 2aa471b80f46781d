#pragma once
// A copy between two device tensors (copy_, .to on the device): the program the backend's copy
// path launches. Converts between the types the device computes with; data it does not compute
// with (complex) moves as bytes between tensors of one type.
#include "neuronsim/kernels/ops/op_call.h"
#include "neuronsim/kernels/ops/op_rule.h"

namespace neuronsim::kernels::ops {

/// Whether a device copy from `src` to `dst` has a program (else only the values move).
bool device_copy_supported(const TensorArg& src, const TensorArg& dst);

/// `src` and `dst` with their device descriptions; byte views (describe_bytes) for types the
/// device does not compute with. `grid`: the physical cores the copy may span.
Programs device_copy_programs(const TensorArg& src, const TensorArg& dst,
                              const TensorDesc& src_bytes, const TensorDesc& dst_bytes,
                              const device_model::CoreParams& core, uint32_t grid);

}  // namespace neuronsim::kernels::ops
