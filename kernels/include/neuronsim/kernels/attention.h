#pragma once
// Flash attention forward: o = softmax(q @ k^T * scale [+ mask] [causal]) @ v in one program,
// the scores and probabilities never leaving the chip.
//
// Per batch, K is loaded once in row tiles and transposed on TensorE into a resident K^T (head
// dim on partitions) and V stays resident in row tiles. Per 128-row Q tile (transposed the same
// way) the keys stream in blocks of 512: S = Q K^T into a PSUM bank (TensorE), the running row
// max on VectorE, P = exp(scale * S - scale * max) on ScalarE with the row sum accumulated by the
// same instruction, the O accumulator (in PSUM) rescaled by exp(scale * (old max - new max)),
// P transposed on TensorE in 128x128 pieces and O += P V accumulated in PSUM. O is normalised by
// the row sum and stored once. Causal attention skips blocks wholly above the diagonal and
// masks the diagonal blocks with a predicate built once per diagonal offset (iota on GpSimdE).
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct AttentionSpec {
  float scale = 1.0f;   // multiplies q @ k^T; must be finite and > 0
  bool causal = false;  // key j is masked for query i when j > i (top-left aligned, as SDPA)
};

/// q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv], o [..., Sq, Dv] with D, Dv <= 128 and any
/// strides; the batch dims of q, k, v and the additive float `mask` (broadcastable to
/// [..., Sq, Sk]) broadcast to o's. q, k and v share one float dtype (fp32, bf16 or fp16), the
/// dtype the matmuls run in (P is rounded to it for P @ V, as flash kernels do); statistics and
/// accumulators are fp32. Throws std::invalid_argument naming a bad shape, dtype or scale and
/// std::length_error when one batch's K^T and V do not fit SBUF.
device_model::Program build_flash_attention(const std::string& name, const TensorDesc& q,
                                            const TensorDesc& k, const TensorDesc& v,
                                            const TensorDesc& o,
                                            const std::optional<TensorDesc>& mask,
                                            const AttentionSpec& spec,
                                            const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
