#pragma once
// A fused matmul region: C[b] = A[b] @ B[b] into PSUM, then the region's epilogue (bias,
// activation, residual add, scaling, casts: a tile body, tile_program.h) reads the accumulator
// straight from PSUM on VectorE/ScalarE and stores only what leaves the region.
//
// Operands are loaded K-major as TensorE wants them; an operand stored with K contiguous (the
// left operand of x @ W^T, the weight of nn.Linear) is loaded in natural row stripes and
// transposed on TensorE once per tile. The operand that fits SBUF whole stays resident for the
// region, so each of its tiles is loaded and transposed once ("transposes planned once"); the
// other streams through two buffers so loads overlap matmuls.
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/compiler/tile_program.h"

namespace neuronsim::kernels::compiler {

struct MatmulOperand {
  int value = -1;
  uint64_t address = 0;
  device_model::DType dtype = device_model::DType::kFp32;
  std::vector<int64_t> batch_strides;  // over the region's batch dims (0: broadcast)
  int64_t row_stride = 0, col_stride = 0;
};

struct MatmulRegionSpec {
  std::string name;
  std::vector<int64_t> batch;  // batch sizes
  int64_t m = 0, k = 0, n = 0;
  MatmulOperand a;  // [batch..., m, k]
  MatmulOperand b;  // [batch..., k, n]
  /// Shape [batch..., m, n] with exactly one kAcc instruction (the product).
  TileProgramSpec epilogue;
};

/// Throws std::length_error when the operands' tiles do not fit SBUF.
device_model::Program build_matmul_region(const MatmulRegionSpec& spec,
                                          const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::compiler
