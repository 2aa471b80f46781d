#pragma once
// C[b] = epilogue(alpha * A[b] @ B[b] + beta * bias) for any strides, as the NeuronCore runs it:
// contraction on the SBUF partitions of both operands, A as the stationary (transposed) operand,
// B moving, fp32 accumulation in PSUM. Operands whose contraction dim is not already the row dim
// are loaded naturally and transposed on TensorE; A^T stays resident per M block while B streams
// through two buffers; PSUM rotates over four banks; VectorE and ScalarE run the epilogue.
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct MatmulSpec {
  float alpha = 1.0f;
  float beta = 1.0f;  // scales the bias, when there is one
  device_model::ActFunc epilogue = device_model::ActFunc::kCopy;
  /// One-element fp32 tensors in device memory that multiply the product with alpha
  /// (torch._scaled_mm's tensor-wise scale_a and scale_b): read by the program, so their values
  /// need not be known when it is built.
  std::vector<TensorDesc> scales;
};

/// a: [..., M, K], b: [..., K, N], c: [..., M, N] with equal batch dims (a or b may have
/// batch stride 0); bias broadcastable to c. Throws std::invalid_argument on mismatched shapes.
device_model::Program build_matmul(const std::string& name, const TensorDesc& a,
                                   const TensorDesc& b, const TensorDesc& c,
                                   const std::optional<TensorDesc>& bias, const MatmulSpec& spec,
                                   const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
