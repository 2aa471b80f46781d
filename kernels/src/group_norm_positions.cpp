#include "group_norm_positions.h"

#include <algorithm>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;

namespace {

constexpr uint32_t kCols = 512;  // PSUM bank columns of fp32 (moving_free_max)

// Per-partition SBUF bytes beside the resident image: the [P, C] broadcasts (mean, scale,
// shift), a squares scratch tile, the [1, C] rows (weight, bias, scale, shift, expanded mean)
// and the small per-group columns.
uint64_t fixed_bytes(int64_t C, int64_t G) {
  return static_cast<uint64_t>(C) * 4 * (4 + 5) + static_cast<uint64_t>(G) * 4 * 8 + 1024;
}

}  // namespace

bool group_norm_positions_fit(const GroupNormShape& s, const CoreParams& core) {
  if (s.groups < 1 || s.C < 1 || s.C % s.groups != 0 || s.HxW < 1 || s.N < 1) return false;
  if (s.groups > static_cast<int64_t>(kCols)) return false;
  if (s.C > static_cast<int64_t>(core.vector.max_free_elements_sbuf)) return false;
  const int64_t P = core.sbuf.partitions;
  const int64_t tiles = (s.HxW + P - 1) / P;
  const uint64_t resident = static_cast<uint64_t>(tiles) * static_cast<uint64_t>(s.C) * 4;
  return resident + fixed_bytes(s.C, s.groups) <= core.sbuf.partition_bytes * 3 / 4;
}

// Per image: its HxW positions in tiles of P partitions, each position's C channels one
// contiguous run (one DMA per tile, loaded once). Per-group sums over a tile's channels
// (VectorE) are summed over partitions and tiles by TensorE (a ones column as the stationary
// operand, accumulating in PSUM); the mean, then the sum of squares around it (two passes, as
// the contiguous kernel), then rstd (ScalarE). Scale and shift per channel are broadcast from
// partition 0 to every partition by TensorE (a ones row, K = 1), and y = x * scale + shift is
// written back in place and stored with one DMA per tile.
Program build_group_norm_positions(const std::string& name, const GroupNormIo& io,
                                   const CoreParams& core) {
  const GroupNormShape& s = io.shape;
  const uint32_t P = core.sbuf.partitions, C = static_cast<uint32_t>(s.C),
                 G = static_cast<uint32_t>(s.groups), Cg = C / G;
  const int64_t HW = s.HxW;
  const uint32_t tiles = static_cast<uint32_t>((HW + P - 1) / P);
  const float inv_d = 1.0f / static_cast<float>(static_cast<int64_t>(Cg) * HW);
  ProgramBuilder b(name, core);
  const uint64_t row_bytes = uint64_t{C} * 4;
  const uint64_t x_off = b.alloc_sbuf(row_bytes * tiles), sq_off = b.alloc_sbuf(row_bytes),
                 nm_b = b.alloc_sbuf(row_bytes), sc_b = b.alloc_sbuf(row_bytes),
                 sh_b = b.alloc_sbuf(row_bytes), w_row = b.alloc_sbuf(row_bytes),
                 b_row = b.alloc_sbuf(row_bytes), sc_row = b.alloc_sbuf(row_bytes),
                 sh_row = b.alloc_sbuf(row_bytes), nm_row = b.alloc_sbuf(row_bytes),
                 part_off = b.alloc_sbuf(uint64_t{G} * 4),
                 stat_off = b.alloc_sbuf(uint64_t{G} * 4 * 4), ones_col = b.alloc_sbuf(4),
                 ones_row = b.alloc_sbuf(uint64_t{P} * 4);
  const uint64_t bank_stat = b.alloc_psum_bank(), bank_bc = b.alloc_psum_bank();
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);

  auto tile_rows = [&](uint32_t t) {
    return static_cast<uint32_t>(std::min<int64_t>(P, HW - int64_t{t} * P));
  };
  auto x_tile = [&](uint32_t t, uint32_t p) {
    return isa::sbuf_tile(DType::kFp32, p, x_off + uint64_t{t} * row_bytes, C);
  };
  // [p, G, Cg] view of a [p, C] tile.
  auto grouped = [&](uint64_t off, uint32_t p) {
    return isa::sbuf(DType::kFp32, 0, p, off, {{static_cast<int64_t>(Cg), G}, {1, Cg}});
  };
  // A [1, G] column set on partition 0, read as [1, G, Cg] (each group's value per channel).
  auto per_channel = [&](uint64_t off) {
    return isa::sbuf(DType::kFp32, 0, 1, off, {{1, G}, {0, Cg}});
  };
  auto row = [&](uint64_t off) { return isa::sbuf_tile(DType::kFp32, 1, off, C); };
  auto stat = [&](int i) {
    return isa::sbuf_tile(DType::kFp32, 1, stat_off + uint64_t(i) * G * 4, G);
  };
  const AccessPattern tot = stat(0), neg_mean = stat(1), rstd = stat(2), mean = stat(3);

  b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, P, ones_col, 1), 1.0f));
  b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, 1, ones_row, P), 1.0f));
  auto param_row = [&](const TensorDesc& t, uint64_t off) {
    const int64_t st = t.strides.empty() ? 1 : t.strides[0];
    b.emit(qparam, isa::dma_copy(row(off), hbm_ap(t, 0, 1, 0, {{st, C}})));
  };
  if (io.weight) param_row(*io.weight, w_row);
  if (io.bias) param_row(*io.bias, b_row);
  ProgramBuilder::Token ready = b.mark(kVector);
  b.wait(kVector, b.mark(qparam));
  b.wait(kTensor, b.mark(kVector));

  // Sums a [p, G] partial of tile t into PSUM [1, G] (the first tile starts it).
  auto sum_partitions = [&](uint32_t t, uint32_t p) {
    b.wait(kTensor, b.mark(kVector));
    b.emit(kTensor, isa::matmul(isa::psum_tile(DType::kFp32, 1, bank_stat, G),
                                isa::sbuf_tile(DType::kFp32, p, ones_col, 1),
                                isa::sbuf_tile(DType::kFp32, p, part_off, G), t > 0));
    b.wait(kVector, b.mark(kTensor));  // the partial buffer is free again
  };
  // Broadcasts a [1, C] row to [P, C] at `dst`, kCols columns at a time.
  auto broadcast = [&](uint64_t src, uint64_t dst) {
    b.wait(kTensor, b.mark(kVector));
    for (uint32_t c0 = 0; c0 < C; c0 += kCols) {
      const uint32_t cw = std::min(kCols, C - c0);
      b.emit(kTensor, isa::matmul(isa::psum_tile(DType::kFp32, P, bank_bc, cw),
                                  isa::sbuf_tile(DType::kFp32, 1, ones_row, P),
                                  isa::sbuf_tile(DType::kFp32, 1, src + c0 * 4ull, cw), false));
      b.wait(kVector, b.mark(kTensor));
      b.emit(kVector, isa::tensor_copy(isa::sbuf_tile(DType::kFp32, P, dst + c0 * 4ull, cw),
                                       isa::psum_tile(DType::kFp32, P, bank_bc, cw)));
      b.wait(kTensor, b.mark(kVector));
    }
  };

  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t in_base = n * io.in.strides[0], out_base = n * io.out.strides[0];
    b.wait(qin, ready);
    for (uint32_t t = 0; t < tiles; ++t) {
      const uint32_t p = tile_rows(t);
      b.emit(qin, isa::dma_copy(x_tile(t, p),
                                hbm_ap(io.in, in_base + int64_t{t} * P * C, p, C, {{1, C}})));
    }
    b.wait(kVector, b.mark(qin));
    // Pass 1: the sum per group, then -mean.
    for (uint32_t t = 0; t < tiles; ++t) {
      const uint32_t p = tile_rows(t);
      b.emit(kVector, isa::tensor_reduce(isa::sbuf_tile(DType::kFp32, p, part_off, G),
                                         grouped(x_off + t * row_bytes, p), ReduceOp::kAdd));
      sum_partitions(t, p);
    }
    b.emit(kVector, isa::tensor_scalar(neg_mean, isa::psum_tile(DType::kFp32, 1, bank_stat, G),
                                       AluOp::kMultiply, isa::imm(-inv_d)));
    b.emit(kVector, isa::tensor_copy(isa::sbuf(DType::kFp32, 0, 1, nm_row, {{Cg, G}, {1, Cg}}),
                                     per_channel(stat_off + 1ull * G * 4)));
    broadcast(nm_row, nm_b);
    // Pass 2: the sum of squares around the mean, then rstd.
    for (uint32_t t = 0; t < tiles; ++t) {
      const uint32_t p = tile_rows(t);
      const AccessPattern sq = isa::sbuf_tile(DType::kFp32, p, sq_off, C);
      b.emit(kVector, isa::tensor_tensor(sq, x_tile(t, p), isa::sbuf_tile(DType::kFp32, p, nm_b, C),
                                         AluOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(sq, sq, sq, AluOp::kMultiply));
      b.emit(kVector, isa::tensor_reduce(isa::sbuf_tile(DType::kFp32, p, part_off, G),
                                         grouped(sq_off, p), ReduceOp::kAdd));
      sum_partitions(t, p);
    }
    b.emit(kVector, isa::tensor_copy(tot, isa::psum_tile(DType::kFp32, 1, bank_stat, G)));
    b.wait(kScalar, b.mark(kVector));
    b.emit(kScalar, isa::activation(rstd, tot, ActFunc::kRsqrt, isa::imm(inv_d), isa::imm(io.eps)));
    b.wait(kVector, b.mark(kScalar));
    // scale = weight * rstd, shift = bias - mean * scale per channel, broadcast to P partitions.
    const AccessPattern sc = isa::sbuf(DType::kFp32, 0, 1, sc_row, {{Cg, G}, {1, Cg}});
    if (io.weight)
      b.emit(kVector,
             isa::tensor_tensor(sc, isa::sbuf(DType::kFp32, 0, 1, w_row, {{Cg, G}, {1, Cg}}),
                                per_channel(stat_off + 2ull * G * 4), AluOp::kMultiply));
    else
      b.emit(kVector, isa::tensor_copy(sc, per_channel(stat_off + 2ull * G * 4)));
    b.emit(kVector, isa::tensor_tensor(row(sh_row), row(nm_row), row(sc_row), AluOp::kMultiply));
    if (io.bias)
      b.emit(kVector, isa::tensor_tensor(row(sh_row), row(sh_row), row(b_row), AluOp::kAdd));
    broadcast(sc_row, sc_b);
    broadcast(sh_row, sh_b);
    // y = x * scale + shift in place, one store per tile.
    for (uint32_t t = 0; t < tiles; ++t) {
      const uint32_t p = tile_rows(t);
      const AccessPattern x = x_tile(t, p);
      b.emit(kVector,
             isa::tensor_tensor(x, x, isa::sbuf_tile(DType::kFp32, p, sc_b, C), AluOp::kMultiply));
      b.emit(kVector,
             isa::tensor_tensor(x, x, isa::sbuf_tile(DType::kFp32, p, sh_b, C), AluOp::kAdd));
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(hbm_ap(io.out, out_base + int64_t{t} * P * C, p, C, {{1, C}}), x));
    }
    if (io.mean || io.rstd) {
      b.emit(kVector, isa::tensor_scalar(mean, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
      b.wait(qout, b.mark(kVector));
      if (io.mean) b.emit(qout, isa::dma_copy(hbm_ap(*io.mean, n * G, 1, 0, {{1, G}}), mean));
      if (io.rstd) b.emit(qout, isa::dma_copy(hbm_ap(*io.rstd, n * G, 1, 0, {{1, G}}), rstd));
    }
    ready = b.mark(qout);
    b.wait(kVector, ready);  // the image's buffers are free for the next
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
