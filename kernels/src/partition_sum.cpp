#include "partition_sum.h"

#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels {

using namespace device_model;

void emit_partition_sum(ProgramBuilder& b, const AccessPattern& column, uint64_t bank,
                        const AccessPattern& total) {
  const AccessPattern row = isa::psum_tile(DType::kFp32, 1, bank, column.partitions);
  b.wait(kTensor, b.mark(kVector));
  b.emit(kTensor, isa::transpose(row, column));
  b.wait(kVector, b.mark(kTensor));
  b.emit(kVector, isa::tensor_reduce(total, row, ReduceOp::kAdd));
}

}  // namespace neuronsim::kernels
