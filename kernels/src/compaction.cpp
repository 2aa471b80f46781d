#include "neuronsim/kernels/compaction.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"
#include "partition_sum.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_count_nonzero(const std::string& name, const TensorDesc& in, const TensorDesc& count,
                            const CoreParams& core) {
  if (count.numel() != 1) throw std::invalid_argument("count_nonzero: the counter is one element");
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t max_free =
      std::min<uint64_t>(core.vector.max_free_elements_sbuf, core.sbuf.partition_bytes / 4 / 8);
  std::vector<Tile> tiles;
  if (in.numel() > 0) {
    std::vector<int64_t> sizes = in.sizes;
    std::vector<std::vector<int64_t>> strides = {in.strides};
    if (sizes.empty()) {
      sizes = {1};
      strides = {{1}};
    }
    tiles = make_tiles(sizes, strides, P, max_free);
  }
  uint64_t widest = 1;
  for (const Tile& t : tiles) widest = std::max(widest, t.free_elements());
  const uint64_t x_off = b.alloc_sbuf(2 * widest * 4), m_off = b.alloc_sbuf(widest * 4),
                 acc_off = b.alloc_sbuf(4), part_off = b.alloc_sbuf(4), out_off = b.alloc_sbuf(8);
  const uint64_t bank = b.alloc_psum_bank();
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, P, acc_off, 1);
  b.emit(kVector, isa::memset(acc, 0.0f));
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token x_free[2];
  int s = 0;
  for (const Tile& t : tiles) {
    const uint32_t f = static_cast<uint32_t>(t.free_elements());
    AccessPattern x = isa::sbuf_tile(DType::kFp32, t.partitions, x_off + s * widest * 4, f);
    b.wait(qin, x_free[s]);
    AccessPattern src = tile_ap(in, t, t.operands[0]);
    if (t.nfree == 2) {  // the same elements, as the tile's two free dims
      x.dims[0] = {t.free_sizes[1], t.free_sizes[0]};
      x.dims[1] = {1, t.free_sizes[1]};
      x.ndims = 2;
    }
    b.emit(qin, isa::dma_copy(x, src));
    b.wait(kVector, b.mark(qin));
    const AccessPattern m = isa::sbuf_tile(DType::kFp32, t.partitions, m_off, f);
    const AccessPattern flat_x =
        isa::sbuf_tile(DType::kFp32, t.partitions, x_off + s * widest * 4, f);
    const AccessPattern part = isa::sbuf_tile(DType::kFp32, t.partitions, part_off, 1);
    b.emit(kVector, isa::tensor_scalar(m, flat_x, AluOp::kNotEqual, isa::imm(0.0f)));
    b.emit(kVector, isa::tensor_reduce(part, m, ReduceOp::kAdd));
    const AccessPattern acc_p = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off, 1);
    b.emit(kVector, isa::tensor_tensor(acc_p, acc_p, part, AluOp::kAdd));
    x_free[s] = b.mark(kVector);
    s ^= 1;
  }
  // Across partitions: transpose the partial counts into one row and sum it.
  const AccessPattern total = isa::sbuf_tile(DType::kFp32, 1, out_off, 1);
  const AccessPattern total_i = isa::sbuf_tile(DType::kInt32, 1, out_off + 4, 1);
  emit_partition_sum(b, acc, bank, total);
  b.emit(kVector, isa::tensor_copy(total_i, total));
  b.wait(qout, b.mark(kVector));
  b.emit(qout, isa::dma_copy(hbm_ap(count, 0, 1, 0, {{1, 1}}), total_i));
  return std::move(b).build();
}

Program build_coordinates(const std::string& name, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& positions, const TensorDesc& out, float fill,
                          const CoreParams& core) {
  if (out.dim() != 2 || out.sizes[1] != static_cast<int64_t>(sizes.size()) ||
      out.sizes[0] < static_cast<int64_t>(positions.size()))
    throw std::invalid_argument(
        fmt::format("coordinates: output {} for {} positions of a {}-d tensor", out.to_string(),
                    positions.size(), sizes.size()));
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const uint32_t nd = static_cast<uint32_t>(sizes.size());
  if (nd == 0 || out.sizes[0] == 0) return std::move(b).build();
  // Row-major strides of the logical shape.
  std::vector<int64_t> stride(nd, 1);
  for (int64_t d = static_cast<int64_t>(nd) - 2; d >= 0; --d)
    stride[static_cast<size_t>(d)] =
        stride[static_cast<size_t>(d) + 1] * sizes[static_cast<size_t>(d) + 1];
  const uint64_t flat_off = b.alloc_sbuf(2 * 4), coord_off = b.alloc_sbuf(2 * uint64_t(nd) * 4);
  const StreamId qout = dma_queue(1);
  Token free[2];
  int s = 0;
  auto rows_ap = [&](int64_t row, uint32_t p) {
    return hbm_ap(out, row * out.strides[0], p, out.strides[0], {{out.strides[1], nd}});
  };
  size_t i = 0;
  int64_t row = 0;
  while (i < positions.size()) {
    // A run of consecutive flat positions, at most one per partition.
    size_t j = i + 1;
    while (j < positions.size() && j - i < P && positions[j] == positions[j - 1] + 1) ++j;
    const uint32_t p = static_cast<uint32_t>(j - i);
    const AccessPattern flat = isa::sbuf_tile(DType::kInt32, p, flat_off + s * 4, 1);
    b.wait(kGpSimd, free[s]);
    b.emit(kGpSimd, isa::iota(flat, static_cast<int32_t>(positions[i]), 1, {0}));
    b.wait(kVector, b.mark(kGpSimd));
    for (uint32_t d = 0; d < nd; ++d) {
      const AccessPattern c = isa::sbuf_tile(DType::kInt32, p, coord_off + (s * nd + d) * 4, 1);
      b.emit(kVector,
             isa::tensor_scalar(c, flat, AluOp::kDivide, isa::imm(static_cast<float>(stride[d])),
                                AluOp::kMod, isa::imm(static_cast<float>(sizes[d]))));
    }
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(rows_ap(row, p),
                               isa::sbuf_tile(DType::kInt32, p, coord_off + s * nd * 4, nd)));
    free[s] = b.mark(qout);
    row += p;
    i = j;
    s ^= 1;
  }
  // Padding rows (nonzero_static).
  if (row < out.sizes[0]) {
    const uint64_t pad_off = b.alloc_sbuf(uint64_t(nd) * 4);
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, out.sizes[0] - row));
    b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kInt32, p, pad_off, nd), fill));
    b.wait(qout, b.mark(kVector));
    for (; row < out.sizes[0]; row += P) {
      const uint32_t q = static_cast<uint32_t>(std::min<int64_t>(P, out.sizes[0] - row));
      b.emit(qout, isa::dma_copy(rows_ap(row, q), isa::sbuf_tile(DType::kInt32, q, pad_off, nd)));
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
