#include "neuronsim/kernels/mse_loss.h"

#include <algorithm>
#include <stdexcept>

#include "neuronsim/device/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device;
using Token = ProgramBuilder::Token;

Program build_squared_error_sum(const std::string& name, const TensorDesc& a, const TensorDesc& b,
                                const TensorDesc& out, float scale, const CoreParams& core) {
  if (out.numel() != 1)
    throw std::invalid_argument("squared error: the output must be one element");
  ProgramBuilder pb(name, core);
  const uint32_t P = core.sbuf.partitions;
  const std::vector<int64_t> sizes = a.sizes.size() >= b.sizes.size() ? a.sizes : b.sizes;
  const uint64_t budget = core.sbuf.partition_bytes / 2;
  const uint64_t max_free = std::max<uint64_t>(
      1, std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (2 * 2 * 4)));
  const auto tiles =
      make_tiles(sizes, {broadcast_strides(a, sizes), broadcast_strides(b, sizes)}, P, max_free);
  uint64_t tile_free = 1;
  for (const Tile& t : tiles) tile_free = std::max(tile_free, t.free_elements());
  const uint64_t x_off = pb.alloc_sbuf(2 * 2 * tile_free * 4), acc_off = pb.alloc_sbuf(2 * 4),
                 r_off = pb.alloc_sbuf(4);
  const uint64_t bank = pb.alloc_psum_bank();
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, P, acc_off, 1),
                      r = isa::sbuf_tile(DType::kFp32, 1, r_off, 1);
  pb.emit(kVector, isa::memset(acc, 0.0f));
  const StreamId qa = dma_queue(0), qb = dma_queue(1);
  Token slot_free[2];
  for (size_t ti = 0; ti < tiles.size(); ++ti) {
    const Tile& t = tiles[ti];
    const int s = static_cast<int>(ti % 2);
    const uint32_t f = static_cast<uint32_t>(t.free_elements());
    const AccessPattern xa = isa::sbuf_tile(DType::kFp32, t.partitions,
                                            x_off + s * 2 * tile_free * 4, f),
                        xb = isa::sbuf_tile(DType::kFp32, t.partitions,
                                            x_off + (s * 2 + 1) * tile_free * 4, f),
                        part = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off + 4, 1),
                        acc_p = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off, 1);
    pb.wait(qa, slot_free[s]);
    pb.emit(qa, isa::dma_copy(xa, tile_ap(a, t, t.operands[0])));
    pb.wait(qb, slot_free[s]);
    pb.emit(qb, isa::dma_copy(xb, tile_ap(b, t, t.operands[1])));
    pb.wait(kVector, pb.mark(qa));
    pb.wait(kVector, pb.mark(qb));
    pb.emit(kVector, isa::tensor_tensor(xa, xa, xb, AluOp::kSubtract));
    pb.emit(kVector, isa::tensor_tensor(xa, xa, xa, AluOp::kMultiply));
    pb.emit(kVector, isa::tensor_reduce(part, xa, ReduceOp::kAdd));
    pb.emit(kVector, isa::tensor_tensor(acc_p, acc_p, part, AluOp::kAdd));
    slot_free[s] = pb.mark(kVector);
  }
  // Across partitions: the accumulator column becomes a PSUM row, summed and scaled.
  const AccessPattern row = isa::psum_tile(DType::kFp32, 1, bank, P);
  pb.wait(kTensor, pb.mark(kVector));
  pb.emit(kTensor, isa::transpose(row, acc));
  pb.wait(kVector, pb.mark(kTensor));
  pb.emit(kVector, isa::tensor_reduce(r, row, ReduceOp::kAdd));
  pb.emit(kVector, isa::tensor_scalar(r, r, AluOp::kMultiply, isa::imm(scale)));
  pb.wait(qa, pb.mark(kVector));
  pb.emit(qa, isa::dma_copy(hbm_ap(out, 0, 1, 0, {}), r));
  return std::move(pb).build();
}

}  // namespace neuronsim::kernels
