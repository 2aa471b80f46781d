#include "neuronsim/kernels/group_norm.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "group_norm_positions.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/rows.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

// Per-channel fp32 arrays of a tile ([rows, C/G] each) the kernels keep beside the chunks.
constexpr uint32_t kChannelArrays = 8;

// Channels [j0, j0 + nj) of a row, each at spatial positions [s0, s0 + sl): several whole
// channels, or a part of one (nj == 1) when a channel alone does not fit.
struct Chunk {
  int64_t j0 = 0, nj = 1, s0 = 0, sl = 0;
  uint32_t cols() const { return static_cast<uint32_t>(nj * sl); }
};

struct Plan {
  int64_t G = 1, Cg = 1, HW = 1, D = 1;  // D = Cg * HW, a row's elements
  uint32_t images = 1;                   // whole images per row tile
  uint32_t rows = 1;                     // rows of a full tile (images * G)
  uint32_t chunk = 1;                    // columns of the largest chunk
  bool resident = false;                 // one chunk: loaded once per tile
  bool channels_last = false;            // [N, HxW, C] memory: chunks of whole positions
  int64_t C = 1;
  std::vector<Chunk> chunks;
};

Plan make_plan(const std::string& name, const GroupNormShape& s, const CoreParams& core,
               uint32_t buffers, bool channels_last) {
  if (!group_norm_fits(s, core)) {
    throw std::invalid_argument(fmt::format("{}: N={} C={} HxW={} groups={} not supported", name,
                                            s.N, s.C, s.HxW, s.groups));
  }
  Plan p;
  p.G = s.groups;
  p.Cg = s.C / s.groups;
  p.HW = s.HxW;
  p.D = p.Cg * p.HW;
  const uint32_t P = core.sbuf.partitions;
  p.images = static_cast<uint32_t>(std::min<int64_t>(P / p.G, std::max<int64_t>(s.N, 1)));
  p.rows = static_cast<uint32_t>(p.images * p.G);
  p.channels_last = channels_last;
  p.C = s.C;
  const int64_t limit = row_chunk(core, buffers, std::max<int64_t>(p.D, 1));
  if (channels_last && p.D > limit) {
    // Whole positions (every channel of the group), as many as fit.
    const int64_t per = std::max<int64_t>(1, limit / p.Cg);
    for (int64_t s0 = 0; s0 < p.HW; s0 += per)
      p.chunks.push_back({0, p.Cg, s0, std::min(per, p.HW - s0)});
  } else if (p.D <= limit) {
    p.chunks.push_back({0, p.Cg, 0, p.HW});
  } else if (p.HW <= limit) {
    const int64_t per = limit / p.HW;
    for (int64_t j = 0; j < p.Cg; j += per)
      p.chunks.push_back({j, std::min(per, p.Cg - j), 0, p.HW});
  } else {
    for (int64_t j = 0; j < p.Cg; ++j) {
      for (int64_t s0 = 0; s0 < p.HW; s0 += limit)
        p.chunks.push_back({j, 1, s0, std::min(limit, p.HW - s0)});
    }
  }
  p.resident = p.chunks.size() == 1;
  for (const Chunk& c : p.chunks) p.chunk = std::max(p.chunk, c.cols());
  return p;
}

// Channels-last and not also contiguous: the layout a tensor's chunks are moved in.
bool is_channels_last(const TensorDesc& t) {
  return !t.contiguous() && group_norm_channels_last(t.sizes, t.strides);
}

void check_dense(const std::string& name, const TensorDesc& t, int64_t numel, const char* role) {
  if (!(t.contiguous() || is_channels_last(t)) || static_cast<int64_t>(t.numel()) != numel) {
    throw std::invalid_argument(
        fmt::format("{}: {} {} must be contiguous or channels-last with {} elements", name, role,
                    t.to_string(), numel));
  }
}

// Moves a chunk of rows [r0, r0 + rows) between a data tensor in HBM and the SBUF tile at `off`
// (columns in the plan's order: channel outer, or position outer for a channels-last input) on
// queue q. A contiguous tensor's rows are D elements apart (one DMA); a channels-last tensor's
// are one DMA per image, its G rows Cg channels apart.
void chunk_dma(ProgramBuilder& b, StreamId q, const TensorDesc& t, uint64_t off, const Plan& p,
               int64_t r0, uint32_t rows, const Chunk& c, bool load) {
  const bool cl = is_channels_last(t);
  const int64_t j_stride = cl ? 1 : p.HW, s_stride = cl ? p.C : 1;
  const Dim channels{j_stride, static_cast<uint32_t>(c.nj)};
  const Dim positions{s_stride, static_cast<uint32_t>(c.sl)};
  auto move = [&](int64_t at, uint32_t p0, uint32_t np, int64_t pstride) {
    // Both contiguous: a chunk is one run of a row (whole channels, or a part of one).
    const AccessPattern hbm = !cl && !p.channels_last ? hbm_ap(t, at, np, pstride, {{1, c.cols()}})
                              : p.channels_last ? hbm_ap(t, at, np, pstride, {positions, channels})
                                                : hbm_ap(t, at, np, pstride, {channels, positions});
    const AccessPattern sb = isa::sbuf(DType::kFp32, p0, np, off, {{1, c.cols()}});
    b.emit(q, load ? isa::dma_copy(sb, hbm) : isa::dma_copy(hbm, sb));
  };
  if (!cl) {
    move(r0 * p.D + c.j0 * p.HW + c.s0, 0, rows, p.D);
    return;
  }
  const uint32_t G = static_cast<uint32_t>(p.G);
  for (uint32_t i = 0; i * G < rows; ++i) {
    const int64_t n = r0 / p.G + i;
    move(n * p.C * p.HW + c.s0 * p.C + c.j0, i * G, G, p.Cg);
  }
}

// Rows [r0, r0 + rows) of a dense [N, G] statistic.
AccessPattern stat_ap(const TensorDesc& t, int64_t r0, uint32_t rows) {
  return hbm_ap(t, r0, rows, 1, {});
}

// A [C] parameter as [G, C/G] (group g on partition g).
AccessPattern param_ap(const TensorDesc& t, const Plan& p) {
  const int64_t st = t.strides.empty() ? 1 : t.strides[0];
  return hbm_ap(t, 0, static_cast<uint32_t>(p.G), p.Cg * st, {{st, static_cast<uint32_t>(p.Cg)}});
}

// A [rows, C/G] per-channel array read in the chunk's column order (each channel's value
// repeated over its spatial positions): [nj, sl], or [sl, nj] for channels-last chunks.
AccessPattern spread(uint64_t off, uint32_t rows, const Chunk& c, const Plan& p) {
  const Dim channels{1, static_cast<uint32_t>(c.nj)}, positions{0, static_cast<uint32_t>(c.sl)};
  if (p.channels_last)
    return isa::sbuf(DType::kFp32, 0, rows, off + static_cast<uint64_t>(c.j0) * 4,
                     {positions, channels});
  return isa::sbuf(DType::kFp32, 0, rows, off + static_cast<uint64_t>(c.j0) * 4,
                   {channels, positions});
}

// The 0/1 matrix of rows and groups: sel[i, g] = (i mod G == g) as [rows, G] (`transposed`:
// [G, rows]), from iota values i - g + rows * G (never negative) taken mod G.
void emit_selection(ProgramBuilder& b, uint64_t off, const Plan& p, bool transposed) {
  const uint32_t G = static_cast<uint32_t>(p.G);
  const int32_t base = static_cast<int32_t>(p.rows * G);
  const AccessPattern sel = transposed ? isa::sbuf_tile(DType::kFp32, G, off, p.rows)
                                       : isa::sbuf_tile(DType::kFp32, p.rows, off, G);
  b.emit(kGpSimd, isa::iota(sel, base, transposed ? -1 : 1, {transposed ? 1 : -1}));
  b.wait(kVector, b.mark(kGpSimd));
  b.emit(kVector, isa::tensor_scalar(sel, sel, AluOp::kMod, isa::imm(static_cast<float>(G)),
                                     AluOp::kIsEqual, isa::imm(0.0f)));
}

// A [C] parameter broadcast to the [rows, C/G] per-channel layout of a tile: loaded as [G, C/G],
// multiplied on TensorE by the transposed selection matrix, 512 columns at a time.
Token load_rows_param(ProgramBuilder& b, const TensorDesc& t, const Plan& p, uint64_t stage,
                      uint64_t sel_t, uint64_t dst, uint64_t bank, StreamId q, Token sel_ready,
                      const CoreParams& core) {
  const uint32_t G = static_cast<uint32_t>(p.G), Cg = static_cast<uint32_t>(p.Cg);
  b.emit(q, isa::dma_copy(isa::sbuf_tile(DType::kFp32, G, stage, Cg), param_ap(t, p)));
  b.wait(kTensor, b.mark(q));
  b.wait(kTensor, sel_ready);
  const uint32_t NT = core.tensor.moving_free_max;
  for (uint32_t c0 = 0; c0 < Cg; c0 += NT) {
    const uint32_t cw = std::min(NT, Cg - c0);
    b.emit(kTensor, isa::matmul(isa::psum_tile(DType::kFp32, p.rows, bank, cw),
                                isa::sbuf_tile(DType::kFp32, G, sel_t, p.rows),
                                isa::sbuf_tile(DType::kFp32, G, stage + c0 * 4ull, cw), false));
    b.wait(kVector, b.mark(kTensor));
    b.emit(kVector, isa::tensor_copy(isa::sbuf_tile(DType::kFp32, p.rows, dst + c0 * 4ull, cw),
                                     isa::psum_tile(DType::kFp32, p.rows, bank, cw)));
    b.wait(kTensor, b.mark(kVector));
  }
  return b.mark(kVector);
}

}  // namespace

bool group_norm_channels_last(const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides) {
  if (sizes.size() < 3 || strides.size() != sizes.size()) return false;
  // Dims of size 1 may have any stride (PyTorch's layouts leave them so).
  int64_t expect = 1;
  auto matches = [&](size_t d) {
    const bool ok = sizes[d] == 1 || strides[d] == expect;
    expect *= sizes[d];
    return ok;
  };
  if (!matches(1)) return false;
  for (size_t d = sizes.size() - 1; d >= 2; --d) {
    if (!matches(d)) return false;
  }
  return matches(0);
}

bool group_norm_fits(const GroupNormShape& s, const CoreParams& core) {
  if (s.groups < 1 || s.C < 1 || s.C % s.groups != 0 || s.N < 0 || s.HxW < 0) return false;
  if (s.groups > static_cast<int64_t>(core.sbuf.partitions)) return false;
  // The per-channel arrays take at most a quarter of a partition (the chunks the rest).
  const int64_t Cg = s.C / s.groups;
  return Cg * 4 * kChannelArrays + 1024 <= static_cast<int64_t>(core.sbuf.partition_bytes / 4) &&
         Cg <= std::numeric_limits<uint32_t>::max();
}

Program build_group_norm(const std::string& name, const GroupNormIo& io, const CoreParams& core) {
  const Plan p = make_plan(name, io.shape, core, 3, is_channels_last(io.in));
  const int64_t numel = io.shape.N * io.shape.C * io.shape.HxW;
  check_dense(name, io.in, numel, "input");
  check_dense(name, io.out, numel, "output");
  // Both channels-last: positions on partitions move whole C-channel runs.
  if (is_channels_last(io.in) && is_channels_last(io.out) &&
      group_norm_positions_fit(io.shape, core))
    return build_group_norm_positions(name, io, core);
  ProgramBuilder b(name, core);
  const uint32_t Cg = static_cast<uint32_t>(p.Cg);
  const uint64_t x_off = b.alloc_sbuf(uint64_t{p.chunk} * 4),
                 y_off = b.alloc_sbuf(uint64_t{p.chunk} * 4),
                 w_off = b.alloc_sbuf(uint64_t{Cg} * 4), bb_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 scale_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 shift_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 stage_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 sel_off = b.alloc_sbuf(uint64_t{p.rows} * 4), s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  Token params;
  if (io.weight || io.bias) {
    emit_selection(b, sel_off, p, true);
    const Token sel = b.mark(kVector);
    const uint64_t bank = b.alloc_psum_bank();
    if (io.weight)
      params =
          load_rows_param(b, *io.weight, p, stage_off, sel_off, w_off, bank, qparam, sel, core);
    if (io.bias) {
      b.wait(qparam, params);  // the staging buffer is free again
      params = load_rows_param(b, *io.bias, p, stage_off, sel_off, bb_off, bank, qparam, sel, core);
    }
  }
  const float inv_d = p.D > 0 ? 1.0f / static_cast<float>(p.D) : 0.0f;
  Token free_all;
  for (int64_t n0 = 0; n0 < io.shape.N; n0 += p.images) {
    const uint32_t rows = static_cast<uint32_t>(std::min<int64_t>(p.images, io.shape.N - n0) * p.G);
    const int64_t r0 = n0 * p.G;
    auto col = [&](int i) { return isa::sbuf_tile(DType::kFp32, rows, s_off + i * 4, 1); };
    const AccessPattern sum = col(0), part = col(1), neg_mean = col(2), ssq = col(3), rstd = col(4),
                        mean = col(5);
    const AccessPattern scale = isa::sbuf_tile(DType::kFp32, rows, scale_off, Cg),
                        shift = isa::sbuf_tile(DType::kFp32, rows, shift_off, Cg);
    auto x_of = [&](const Chunk& c) { return isa::sbuf_tile(DType::kFp32, rows, x_off, c.cols()); };
    auto y_of = [&](const Chunk& c) { return isa::sbuf_tile(DType::kFp32, rows, y_off, c.cols()); };
    auto load = [&](const Chunk& c, int pass) {
      if (!(p.resident && pass > 0)) {
        b.wait(qin, free_all);
        chunk_dma(b, qin, io.in, x_off, p, r0, rows, c, true);
      }
      return b.mark(qin);
    };
    // Pass 1: the mean of each row.
    for (size_t k = 0; k < p.chunks.size(); ++k) {
      const Chunk& c = p.chunks[k];
      b.wait(kVector, load(c, 0));
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_reduce(k == 0 ? sum : part, x_of(c), ReduceOp::kAdd));
      if (k > 0) b.emit(kVector, isa::tensor_tensor(sum, sum, part, AluOp::kAdd));
      free_all = b.mark(kVector);
    }
    b.emit(kVector, isa::tensor_scalar(neg_mean, sum, AluOp::kMultiply, isa::imm(-inv_d)));
    free_all = b.mark(kVector);
    // Pass 2: the sum of squares around it (ScalarE's accumulator), then rstd.
    for (size_t k = 0; k < p.chunks.size(); ++k) {
      const Chunk& c = p.chunks[k];
      const Token loaded = load(c, 1);
      b.wait(kScalar, loaded);
      b.wait(kScalar, free_all);
      Instruction sq = isa::activation(y_of(c), x_of(c), ActFunc::kSquare, isa::imm(1.0f),
                                       isa::per_partition(neg_mean));
      sq.has_acc_dst = true;
      sq.acc_dst = k == 0 ? ssq : part;
      b.emit(kScalar, sq);
      free_all = b.mark(kScalar);
      if (k > 0) {
        b.wait(kVector, free_all);
        b.emit(kVector, isa::tensor_tensor(ssq, ssq, part, AluOp::kAdd));
        free_all = b.mark(kVector);
      }
    }
    b.wait(kScalar, free_all);
    b.emit(kScalar, isa::activation(rstd, ssq, ActFunc::kRsqrt, isa::imm(inv_d), isa::imm(io.eps)));
    b.wait(kVector, b.mark(kScalar));
    b.wait(kVector, params);
    // y = x * scale + shift per channel: scale = weight * rstd, shift = bias - mean * scale.
    if (io.weight) {
      b.emit(kVector, isa::tensor_scalar(scale, isa::sbuf_tile(DType::kFp32, rows, w_off, Cg),
                                         AluOp::kMultiply, isa::per_partition(rstd)));
      b.emit(kVector,
             isa::tensor_scalar(shift, scale, AluOp::kMultiply, isa::per_partition(neg_mean)));
      if (io.bias)
        b.emit(kVector,
               isa::tensor_tensor(shift, shift, isa::sbuf_tile(DType::kFp32, rows, bb_off, Cg),
                                  AluOp::kAdd));
    }
    free_all = b.mark(kVector);
    for (const Chunk& c : p.chunks) {
      const AccessPattern x = x_of(c), y = y_of(c);
      b.wait(kVector, load(c, 2));
      b.wait(kVector, free_all);
      if (io.weight) {
        b.emit(kVector, isa::tensor_tensor(y, x, spread(scale_off, rows, c, p), AluOp::kMultiply));
        b.emit(kVector, isa::tensor_tensor(y, y, spread(shift_off, rows, c, p), AluOp::kAdd));
      } else {
        b.emit(kVector, isa::tensor_scalar(y, x, AluOp::kAdd, isa::per_partition(neg_mean),
                                           AluOp::kMultiply, isa::per_partition(rstd)));
        if (io.bias)
          b.emit(kVector, isa::tensor_tensor(y, y, spread(bb_off, rows, c, p), AluOp::kAdd));
      }
      b.wait(qout, b.mark(kVector));
      chunk_dma(b, qout, io.out, y_off, p, r0, rows, c, false);
      free_all = b.mark(qout);
    }
    if (io.mean || io.rstd) {
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_scalar(mean, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
      b.wait(qout, b.mark(kVector));
      if (io.mean) b.emit(qout, isa::dma_copy(stat_ap(*io.mean, r0, rows), mean));
      if (io.rstd) b.emit(qout, isa::dma_copy(stat_ap(*io.rstd, r0, rows), rstd));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

Program build_group_norm_backward(const std::string& name, const GroupNormBackwardIo& io,
                                  const CoreParams& core) {
  const Plan p = make_plan(name, io.shape, core, 4, is_channels_last(io.in));
  const int64_t numel = io.shape.N * io.shape.C * io.shape.HxW;
  check_dense(name, io.grad_out, numel, "grad_out");
  check_dense(name, io.in, numel, "input");
  if (io.grad_in) check_dense(name, *io.grad_in, numel, "grad_input");
  ProgramBuilder b(name, core);
  const uint32_t G = static_cast<uint32_t>(p.G), Cg = static_cast<uint32_t>(p.Cg);
  const uint32_t NT = core.tensor.moving_free_max;
  const uint64_t x_off = b.alloc_sbuf(uint64_t{p.chunk} * 4),
                 g_off = b.alloc_sbuf(uint64_t{p.chunk} * 4),
                 t_off = b.alloc_sbuf(uint64_t{p.chunk} * 4),
                 w_off = b.alloc_sbuf(uint64_t{Cg} * 4), ds_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 db_off = b.alloc_sbuf(uint64_t{Cg} * 4), c1_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 e_off = b.alloc_sbuf(uint64_t{Cg} * 4), gw_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 gb_off = b.alloc_sbuf(uint64_t{Cg} * 4),
                 sel_off = b.alloc_sbuf(uint64_t{std::max<uint32_t>(p.rows, G)} * 4),
                 s_off = b.alloc_sbuf(16 * 4);
  const StreamId qin = dma_queue(0), qg = dma_queue(3), qout = dma_queue(1), qparam = dma_queue(2);
  const bool param_grads = io.grad_weight || io.grad_bias;
  Token params;
  if (io.weight) {
    emit_selection(b, sel_off, p, true);
    const uint64_t bank = b.alloc_psum_bank();
    // gw_off stages the [G, C/G] weight; the gradient accumulators are zeroed after.
    params = load_rows_param(b, *io.weight, p, gw_off, sel_off, w_off, bank, qparam,
                             b.mark(kVector), core);
  }
  uint64_t bank_w = 0, bank_b = 0;
  if (param_grads) {
    b.wait(kGpSimd, params);  // the transposed matrix has been read
    emit_selection(b, sel_off, p, false);
    b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, G, gw_off, Cg), 0.0f));
    b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, G, gb_off, Cg), 0.0f));
    params = b.mark(kVector);
    bank_w = b.alloc_psum_bank();
    bank_b = b.alloc_psum_bank();
  }
  const float s = p.D > 0 ? 1.0f / static_cast<float>(p.D) : 0.0f;
  Token free_all = params;
  for (int64_t n0 = 0; n0 < io.shape.N; n0 += p.images) {
    const uint32_t rows = static_cast<uint32_t>(std::min<int64_t>(p.images, io.shape.N - n0) * p.G);
    const int64_t r0 = n0 * p.G;
    auto col = [&](int i) { return isa::sbuf_tile(DType::kFp32, rows, s_off + i * 4, 1); };
    const AccessPattern mean = col(0), rstd = col(1), dsg = col(2), dbg = col(3), c2 = col(4),
                        c3 = col(5), t1 = col(6), neg_mean = col(7);
    auto arr = [&](uint64_t off) { return isa::sbuf_tile(DType::kFp32, rows, off, Cg); };
    auto tile = [&](uint64_t off, const Chunk& c) {
      return isa::sbuf_tile(DType::kFp32, rows, off, c.cols());
    };
    // The chunk's [nj, sl] view of a chunk buffer (reduced over its innermost axis).
    auto by_channel = [&](uint64_t off, const Chunk& c) {
      const uint32_t nj = static_cast<uint32_t>(c.nj), sl = static_cast<uint32_t>(c.sl);
      if (p.channels_last) return isa::sbuf(DType::kFp32, 0, rows, off, {{1, nj}, {c.nj, sl}});
      return isa::sbuf(DType::kFp32, 0, rows, off, {{c.sl, nj}, {1, sl}});
    };
    auto part = [&](uint64_t off, const Chunk& c) {
      return isa::sbuf(DType::kFp32, 0, rows, off + c.j0 * 4ull,
                       {{1, static_cast<uint32_t>(c.nj)}});
    };
    auto load = [&](const Chunk& c, int pass) {
      if (!(p.resident && pass > 0)) {
        b.wait(qin, free_all);
        b.wait(qg, free_all);
        chunk_dma(b, qin, io.in, x_off, p, r0, rows, c, true);
        chunk_dma(b, qg, io.grad_out, g_off, p, r0, rows, c, true);
      }
      b.wait(kVector, b.mark(qin));
      b.wait(kVector, b.mark(qg));
    };
    b.wait(qparam, free_all);
    b.emit(qparam, isa::dma_copy(mean, stat_ap(io.mean, r0, rows)));
    b.emit(qparam, isa::dma_copy(rstd, stat_ap(io.rstd, r0, rows)));
    const Token stats = b.mark(qparam);
    b.wait(kVector, free_all);
    b.emit(kVector, isa::memset(arr(ds_off), 0.0f));
    b.emit(kVector, isa::memset(arr(db_off), 0.0f));
    free_all = b.mark(kVector);
    // Pass 1: ds = sum(dy * x) and db = sum(dy) per (row, channel).
    for (const Chunk& c : p.chunks) {
      load(c, 0);
      b.wait(kVector, free_all);
      const AccessPattern tmp =
          isa::sbuf(DType::kFp32, 0, rows, e_off + c.j0 * 4ull, {{1, static_cast<uint32_t>(c.nj)}});
      b.emit(kVector,
             isa::tensor_tensor(tile(t_off, c), tile(g_off, c), tile(x_off, c), AluOp::kMultiply));
      b.emit(kVector, isa::tensor_reduce(tmp, by_channel(t_off, c), ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(part(ds_off, c), part(ds_off, c), tmp, AluOp::kAdd));
      b.emit(kVector, isa::tensor_reduce(tmp, by_channel(g_off, c), ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(part(db_off, c), part(db_off, c), tmp, AluOp::kAdd));
      free_all = b.mark(kVector);
    }
    // Per row: dsg = sum_j ds * w, dbg = sum_j db * w (w = 1 without a weight);
    // c2 = (dbg * mean - dsg) * rstd^3 / D, c3 = -c2 * mean - dbg * rstd / D.
    b.wait(kVector, stats);
    b.wait(kVector, params);
    if (io.weight) {
      b.emit(kVector, isa::tensor_tensor(arr(e_off), arr(ds_off), arr(w_off), AluOp::kMultiply));
      b.emit(kVector, isa::tensor_reduce(dsg, arr(e_off), ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(arr(e_off), arr(db_off), arr(w_off), AluOp::kMultiply));
      b.emit(kVector, isa::tensor_reduce(dbg, arr(e_off), ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_scalar(arr(c1_off), arr(w_off), AluOp::kMultiply,
                                         isa::per_partition(rstd)));
    } else {
      b.emit(kVector, isa::tensor_reduce(dsg, arr(ds_off), ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_reduce(dbg, arr(db_off), ReduceOp::kAdd));
    }
    b.emit(kVector, isa::tensor_tensor(c2, dbg, mean, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_tensor(c2, c2, dsg, AluOp::kSubtract));
    b.emit(kVector, isa::tensor_tensor(t1, rstd, rstd, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_tensor(t1, t1, rstd, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_tensor(c2, c2, t1, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_scalar(c2, c2, AluOp::kMultiply, isa::imm(s)));
    b.emit(kVector, isa::tensor_tensor(c3, c2, mean, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_tensor(t1, dbg, rstd, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_scalar(t1, t1, AluOp::kMultiply, isa::imm(s)));
    b.emit(kVector, isa::tensor_tensor(c3, c3, t1, AluOp::kAdd));
    b.emit(kVector, isa::tensor_scalar(c3, c3, AluOp::kMultiply, isa::imm(-1.0f)));
    free_all = b.mark(kVector);
    // Pass 2: dx = dy * rstd * w + x * c2 + c3.
    if (io.grad_in) {
      for (const Chunk& c : p.chunks) {
        load(c, 1);
        b.wait(kVector, free_all);
        const AccessPattern x = tile(x_off, c), g = tile(g_off, c), t = tile(t_off, c);
        b.emit(kVector, isa::tensor_scalar(t, x, AluOp::kMultiply, isa::per_partition(c2),
                                           AluOp::kAdd, isa::per_partition(c3)));
        if (io.weight)
          b.emit(kVector, isa::tensor_tensor(g, g, spread(c1_off, rows, c, p), AluOp::kMultiply));
        else
          b.emit(kVector, isa::tensor_scalar(g, g, AluOp::kMultiply, isa::per_partition(rstd)));
        b.emit(kVector, isa::tensor_tensor(t, t, g, AluOp::kAdd));
        b.wait(qout, b.mark(kVector));
        chunk_dma(b, qout, *io.grad_in, t_off, p, r0, rows, c, false);
        free_all = b.mark(qout);
      }
    }
    // grad_weight[c] += sum over the tile's images of (ds - db * mean) * rstd; grad_bias[c] +=
    // sum of db: the selection matrix [rows, G] on TensorE sums the rows of each group.
    if (param_grads) {
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
      b.emit(kVector, isa::tensor_scalar(arr(e_off), arr(db_off), AluOp::kMultiply,
                                         isa::per_partition(neg_mean)));
      b.emit(kVector, isa::tensor_tensor(arr(e_off), arr(e_off), arr(ds_off), AluOp::kAdd));
      b.emit(kVector, isa::tensor_scalar(arr(e_off), arr(e_off), AluOp::kMultiply,
                                         isa::per_partition(rstd)));
      b.wait(kTensor, b.mark(kVector));
      const AccessPattern sel = isa::sbuf_tile(DType::kFp32, rows, sel_off, G);
      for (uint32_t c0 = 0; c0 < Cg; c0 += NT) {
        const uint32_t cw = std::min(NT, Cg - c0);
        const AccessPattern pw = isa::psum_tile(DType::kFp32, G, bank_w, cw),
                            pb = isa::psum_tile(DType::kFp32, G, bank_b, cw);
        b.emit(
            kTensor,
            isa::matmul(pw, sel, isa::sbuf_tile(DType::kFp32, rows, e_off + c0 * 4ull, cw), false));
        b.emit(kTensor,
               isa::matmul(pb, sel, isa::sbuf_tile(DType::kFp32, rows, db_off + c0 * 4ull, cw),
                           false));
        b.wait(kVector, b.mark(kTensor));
        const AccessPattern aw = isa::sbuf_tile(DType::kFp32, G, gw_off + c0 * 4ull, cw),
                            ab = isa::sbuf_tile(DType::kFp32, G, gb_off + c0 * 4ull, cw);
        b.emit(kVector, isa::tensor_tensor(aw, aw, pw, AluOp::kAdd));
        b.emit(kVector, isa::tensor_tensor(ab, ab, pb, AluOp::kAdd));
        b.wait(kTensor, b.mark(kVector));
      }
      free_all = b.mark(kVector);
    }
  }
  if (param_grads) {
    b.wait(qout, free_all);
    b.wait(qout, params);
    auto store = [&](const TensorDesc& t, uint64_t off) {
      b.emit(qout, isa::dma_copy(param_ap(t, p), isa::sbuf_tile(DType::kFp32, G, off, Cg)));
    };
    if (io.grad_weight) store(*io.grad_weight, gw_off);
    if (io.grad_bias) store(*io.grad_bias, gb_off);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
