#pragma once
// Which attention calls the library's flash attention kernel takes (kernels/attention.h): asked
// by the eager backend's fused-kernel choice (PyTorch's _fused_sdp_choice hook) and by the op's
// rule, so both say the same.
#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::kernels::ops {

/// q, k, v: [..., L, E] of one float dtype, equal batch dims (no GQA broadcast), head dims <= 128;
/// an optional additive float mask broadcastable to the scores; no dropout.
bool flash_attention_supported(const TensorArg& q, const TensorArg& k, const TensorArg& v,
                               const TensorArg& mask, double dropout_p);

}  // namespace neuronsim::kernels::ops
