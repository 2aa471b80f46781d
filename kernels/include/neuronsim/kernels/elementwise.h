#pragma once
// Elementwise kernels: out = expr(in0, in1, ...) with broadcasting (stride-0 inputs). Inputs are
// DMA'd into SBUF as fp32 (or int32 when the expression is integer), the expression runs as
// VectorE ALU, ScalarE activation and VectorE select steps, and the result is DMA'd back with the
// output's dtype (the DMA narrows with round-to-nearest-even). Tiles are double-buffered so loads,
// compute and stores overlap.
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/expr.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

device_model::Program build_elementwise(const std::string& name,
                                        const std::vector<TensorDesc>& inputs,
                                        const TensorDesc& out, const Expr& expr,
                                        const device_model::CoreParams& core);

/// One result of a multi-output expression: the value of step `step`, stored to `out`.
struct ExprOutput {
  TensorDesc out;
  int step = 0;
};
/// Several results of one expression in one pass (a fused chain whose intermediates are used
/// elsewhere too). Every output has the same sizes; the first one's layout drives the tiling.
device_model::Program build_elementwise(const std::string& name,
                                        const std::vector<TensorDesc>& inputs,
                                        const std::vector<ExprOutput>& outputs, const Expr& expr,
                                        const device_model::CoreParams& core);

/// out = in (any strides and dtypes, same shape): HBM-to-HBM DMA through SBUF.
device_model::Program build_copy(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, const device_model::CoreParams& core);
/// Several copies in one kernel (cat, split copies): pairs of (in, out).
device_model::Program build_copies(const std::string& name,
                                   const std::vector<std::pair<TensorDesc, TensorDesc>>& pairs,
                                   const device_model::CoreParams& core);

/// tril/triu over the last two dims: keep (col - row <= diagonal) for lower, >= for upper; the
/// mask comes from a GpSimdE iota of col - row.
device_model::Program build_triangle(const std::string& name, const TensorDesc& in,
                                     const TensorDesc& out, int64_t diagonal, bool lower,
                                     const device_model::CoreParams& core);

/// out[i] = start + i * step for a contiguous 1-D out (GpSimdE iota, VectorE scale).
device_model::Program build_arange(const std::string& name, const TensorDesc& out, double start,
                                   double step, const device_model::CoreParams& core);

/// out = value everywhere (memset on VectorE, then stores).
device_model::Program build_fill(const std::string& name, const TensorDesc& out, float value,
                                 const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
