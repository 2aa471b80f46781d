#include "neuronsim/kernels/layer_norm.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/rows.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

// Folds the trailing `n` dims of every operand into one column dim (they must be contiguous
// within each operand that has them).
void fold_trailing(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides,
                   int64_t n) {
  const size_t nd = sizes.size();
  if (n <= 1) return;
  int64_t cols = 1;
  for (size_t d = nd - n; d < nd; ++d) cols *= sizes[d];
  for (auto& s : strides) {
    int64_t expect = s[nd - 1];
    for (size_t d = nd - 1; d > nd - n; --d) {
      if (s[d - 1] != expect * sizes[d] && s[d - 1] != 0) {
        throw std::invalid_argument("layer_norm: normalized dims are not contiguous");
      }
      expect *= sizes[d];
    }
    const int64_t inner = s[nd - 1];
    s.resize(nd - n + 1);
    s.back() = inner;
  }
  sizes.resize(nd - n + 1);
  sizes.back() = cols;
}

// Per-row statistics (mean, rstd): dense fp32 [rows], rows row0 .. row0 + p.
AccessPattern row_stats_ap(const TensorDesc& s, int64_t row0, uint32_t p) {
  return hbm_ap(s, row0, p, 1, {});
}

// Columns [c0, c0 + cw) of a [D] parameter (weight, bias) on `partitions` partitions: broadcast
// (partition stride 0) to every row.
AccessPattern param_ap(const TensorDesc& t, int64_t c0, uint32_t cw, uint32_t partitions) {
  const int64_t stride = t.strides.empty() ? 1 : t.strides.back();
  return hbm_ap(t, c0 * stride, partitions, 0, {{stride, cw}});
}

// Rows whose columns, the parameters and two tiles' buffers all fit in SBUF: one load per row
// tile, double-buffered so the next tile's load and statistics overlap this tile's normalise and
// store. VectorE reduces and normalises, ScalarE computes sum((x - mean)^2) in its accumulator
// and rsqrt in one activation.
void emit_resident_rows(ProgramBuilder& b, const LayerNormIo& io, const RowLayout& l,
                        const CoreParams& core) {
  const uint32_t P = core.sbuf.partitions;
  const uint32_t D = static_cast<uint32_t>(l.cols);
  const DType out_dt = io.out.dtype;
  const uint64_t es = dtype_size(out_dt);
  const uint64_t w_off = b.alloc_sbuf(uint64_t{D} * 4), bb_off = b.alloc_sbuf(uint64_t{D} * 4),
                 x_off = b.alloc_sbuf(2 * uint64_t{D} * 4),
                 y_off = b.alloc_sbuf(2 * uint64_t{D} * es), sq_off = b.alloc_sbuf(uint64_t{D} * 4),
                 stats_off = b.alloc_sbuf(2 * 5 * 4);  // per slot: sum, -mean, ssq, rstd, mean
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  // Weight and bias broadcast to every partition (partition stride 0), widened to fp32 by the DMA.
  if (io.weight)
    b.emit(qparam,
           isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, w_off, D), param_ap(*io.weight, 0, D, P)));
  if (io.bias)
    b.emit(qparam,
           isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, bb_off, D), param_ap(*io.bias, 0, D, P)));
  const Token params = b.mark(qparam);
  const bool stats_out = io.mean || io.rstd;
  const float inv_d = 1.0f / static_cast<float>(D);
  Token x_release[2], y_release[2];
  for (size_t i = 0; i < l.tiles.size(); ++i) {
    const RowTile& t = l.tiles[i];
    const uint32_t p = t.rows;
    const int slot = static_cast<int>(i % 2);
    const AccessPattern x = isa::sbuf_tile(DType::kFp32, p, x_off + slot * uint64_t{D} * 4, D);
    const AccessPattern y = isa::sbuf_tile(out_dt, p, y_off + slot * uint64_t{D} * es, D);
    auto stat = [&](int k) {
      return isa::sbuf_tile(DType::kFp32, p, stats_off + (slot * 5 + k) * 4, 1);
    };
    const AccessPattern sum = stat(0), neg_mean = stat(1), ssq = stat(2), rstd = stat(3),
                        mean = stat(4);

    b.wait(qin, x_release[slot]);
    b.emit(qin, isa::dma_copy(x, row_ap(io.in, l, t, 0, 0, D)));
    const Token x_tok = b.mark(qin);

    b.wait(kVector, x_tok);
    if (stats_out) b.wait(kVector, y_release[slot]);  // this slot's statistics were stored
    b.emit(kVector, isa::tensor_reduce(sum, x, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_scalar(neg_mean, sum, AluOp::kMultiply, isa::imm(-inv_d)));
    const Token mean_tok = b.mark(kVector);

    b.wait(kScalar, mean_tok);
    Instruction sq =
        isa::activation(isa::sbuf_tile(DType::kFp32, p, sq_off, D), x, ActFunc::kSquare,
                        isa::imm(1.0f), isa::per_partition(neg_mean));
    sq.acc_dst = ssq;
    sq.has_acc_dst = true;
    b.emit(kScalar, sq);
    // rstd = rsqrt(ssq / D + eps) in one activation: func(in * scale + bias).
    b.emit(kScalar, isa::activation(rstd, ssq, ActFunc::kRsqrt, isa::imm(inv_d), isa::imm(io.eps)));
    const Token rstd_tok = b.mark(kScalar);

    b.wait(kVector, rstd_tok);
    b.wait(kVector, params);
    b.wait(kVector, y_release[slot]);
    // Normalise in place while an affine step follows; the last step writes y in out's dtype.
    const bool affine = io.weight || io.bias;
    b.emit(kVector, isa::tensor_scalar(affine ? x : y, x, AluOp::kAdd, isa::per_partition(neg_mean),
                                       AluOp::kMultiply, isa::per_partition(rstd)));
    if (io.weight)
      b.emit(kVector,
             isa::tensor_tensor(io.bias ? x : y, x, isa::sbuf_tile(DType::kFp32, p, w_off, D),
                                AluOp::kMultiply));
    if (io.bias)
      b.emit(kVector,
             isa::tensor_tensor(y, x, isa::sbuf_tile(DType::kFp32, p, bb_off, D), AluOp::kAdd));
    if (io.mean)
      b.emit(kVector, isa::tensor_scalar(mean, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
    const Token v_tok = b.mark(kVector);
    x_release[slot] = v_tok;

    b.wait(qout, v_tok);
    b.emit(qout, isa::dma_copy(row_ap(io.out, l, t, 1, 0, D), y));
    const int64_t row0 = t.offset[1] / std::max<int64_t>(1, D);  // rows are dense in mean/rstd
    if (io.mean) b.emit(qout, isa::dma_copy(row_stats_ap(*io.mean, row0, p), mean));
    if (io.rstd) b.emit(qout, isa::dma_copy(row_stats_ap(*io.rstd, row0, p), rstd));
    y_release[slot] = b.mark(qout);
  }
}

}  // namespace

Program build_layer_norm(const std::string& name, const LayerNormIo& io, const CoreParams& core) {
  ProgramBuilder b(name, core);
  std::vector<int64_t> sizes = io.out.sizes;
  std::vector<std::vector<int64_t>> st{broadcast_strides(io.in, sizes), io.out.strides};
  fold_trailing(sizes, st, io.normalized_dims);
  const RowLayout l = row_layout(sizes, st, -1, core.sbuf.partitions);
  const int64_t D = l.cols;
  // Parameters, two x tiles, two y tiles and a scratch row: 7 fp32 rows at most.
  if (D > 0 && row_chunk(core, 7, D) >= D) {
    emit_resident_rows(b, io, l, core);
    return std::move(b).build();
  }
  const uint32_t chunk = row_chunk(core, 6, D);
  const uint64_t x_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 y_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 w_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 bb_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 sq_off = b.alloc_sbuf(uint64_t{chunk} * 4), s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  const uint32_t P = core.sbuf.partitions;
  const bool resident = chunk >= D;  // weight/bias stay in SBUF for every row tile
  Token params, free_all;
  if (resident) {
    if (io.weight)
      b.emit(qparam, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, w_off, static_cast<uint32_t>(D)),
                                   param_ap(*io.weight, 0, static_cast<uint32_t>(D), P)));
    if (io.bias)
      b.emit(qparam,
             isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, bb_off, static_cast<uint32_t>(D)),
                           param_ap(*io.bias, 0, static_cast<uint32_t>(D), P)));
    params = b.mark(qparam);
  }
  const float inv_d = D > 0 ? 1.0f / static_cast<float>(D) : 0.0f;
  for (const RowTile& t : l.tiles) {
    const uint32_t p = t.rows;
    auto col = [&](int i) { return isa::sbuf_tile(DType::kFp32, p, s_off + i * 4, 1); };
    const AccessPattern sum = col(0), part = col(1), neg_mean = col(2), ssq = col(3), rstd = col(4);
    // Pass 1: mean. Pass 2: sum of squares around the mean. Pass 3: normalise.
    for (int pass = 0; pass < 3; ++pass) {
      for (int64_t c0 = 0; c0 < D; c0 += chunk) {
        const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, D - c0));
        const AccessPattern x = isa::sbuf_tile(DType::kFp32, p, x_off, cw),
                            y = isa::sbuf_tile(DType::kFp32, p, y_off, cw);
        if (!(resident && pass > 0)) {
          b.wait(qin, free_all);
          b.emit(qin, isa::dma_copy(x, row_ap(io.in, l, t, 0, c0, cw)));
        }
        const Token loaded = b.mark(qin);
        if (pass == 0) {
          b.wait(kVector, loaded);
          b.wait(kVector, free_all);
          b.emit(kVector, isa::tensor_reduce(c0 == 0 ? sum : part, x, ReduceOp::kAdd));
          if (c0 > 0) b.emit(kVector, isa::tensor_tensor(sum, sum, part, AluOp::kAdd));
          if (c0 + cw >= D)
            b.emit(kVector, isa::tensor_scalar(neg_mean, sum, AluOp::kMultiply, isa::imm(-inv_d)));
          free_all = b.mark(kVector);
        } else if (pass == 1) {
          b.wait(kScalar, loaded);
          b.wait(kScalar, free_all);
          Instruction sq =
              isa::activation(isa::sbuf_tile(DType::kFp32, p, sq_off, cw), x, ActFunc::kSquare,
                              isa::imm(1.0f), isa::per_partition(neg_mean));
          sq.has_acc_dst = true;
          sq.acc_dst = c0 == 0 ? ssq : part;
          b.emit(kScalar, sq);
          Token done = b.mark(kScalar);
          if (c0 > 0) {
            b.wait(kVector, done);
            b.emit(kVector, isa::tensor_tensor(ssq, ssq, part, AluOp::kAdd));
            done = b.mark(kVector);
          }
          if (c0 + cw >= D) {
            b.wait(kScalar, done);
            b.emit(kScalar,
                   isa::activation(rstd, ssq, ActFunc::kRsqrt, isa::imm(inv_d), isa::imm(io.eps)));
            done = b.mark(kScalar);
          }
          free_all = done;
        } else {
          b.wait(kVector, loaded);
          b.wait(kVector, free_all);
          if (!resident) {
            if (io.weight)
              b.emit(qparam, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, w_off, cw),
                                           param_ap(*io.weight, c0, cw, P)));
            if (io.bias)
              b.emit(qparam, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, bb_off, cw),
                                           param_ap(*io.bias, c0, cw, P)));
            params = b.mark(qparam);
          }
          b.wait(kVector, params);
          b.emit(kVector, isa::tensor_scalar(y, x, AluOp::kAdd, isa::per_partition(neg_mean),
                                             AluOp::kMultiply, isa::per_partition(rstd)));
          if (io.weight)
            b.emit(kVector, isa::tensor_tensor(y, y, isa::sbuf_tile(DType::kFp32, p, w_off, cw),
                                               AluOp::kMultiply));
          if (io.bias)
            b.emit(kVector, isa::tensor_tensor(y, y, isa::sbuf_tile(DType::kFp32, p, bb_off, cw),
                                               AluOp::kAdd));
          const Token done = b.mark(kVector);
          b.wait(qout, done);
          b.emit(qout, isa::dma_copy(row_ap(io.out, l, t, 1, c0, cw), y));
          free_all = b.mark(qout);
          if (!resident) b.wait(qparam, free_all);
        }
      }
    }
    // mean and rstd per row (fp32 [rows]); mean = -neg_mean.
    if (io.mean || io.rstd) {
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_scalar(part, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
      b.wait(qout, b.mark(kVector));
      const int64_t row0 = t.offset[1] / std::max<int64_t>(1, D);  // rows are dense in mean/rstd
      if (io.mean) b.emit(qout, isa::dma_copy(row_stats_ap(*io.mean, row0, p), part));
      if (io.rstd) b.emit(qout, isa::dma_copy(row_stats_ap(*io.rstd, row0, p), rstd));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

Program build_layer_norm_backward(const std::string& name, const LayerNormBackwardIo& io,
                                  const CoreParams& core) {
  ProgramBuilder b(name, core);
  std::vector<int64_t> sizes = io.in.sizes;
  std::vector<std::vector<int64_t>> st{broadcast_strides(io.grad_out, sizes), io.in.strides};
  if (io.grad_in) st.push_back(io.grad_in->strides);
  fold_trailing(sizes, st, io.normalized_dims);
  const RowLayout l = row_layout(sizes, st, -1, core.sbuf.partitions);
  const int64_t D = l.cols;
  const uint32_t P = core.sbuf.partitions;
  const uint32_t NT = core.tensor.moving_free_max;
  if (D > static_cast<int64_t>(row_chunk(core, 8, D)) || D > 8 * static_cast<int64_t>(NT)) {
    throw std::invalid_argument(
        fmt::format("{}: normalized size {} too large for one pass", name, D));
  }
  const uint32_t d = static_cast<uint32_t>(D);
  const uint64_t x_off = b.alloc_sbuf(uint64_t{d} * 4), g_off = b.alloc_sbuf(uint64_t{d} * 4),
                 w_off = b.alloc_sbuf(uint64_t{d} * 4), h_off = b.alloc_sbuf(uint64_t{d} * 4),
                 t_off = b.alloc_sbuf(uint64_t{d} * 4), gw_off = b.alloc_sbuf(uint64_t{d} * 4),
                 gb_off = b.alloc_sbuf(uint64_t{d} * 4), s_off = b.alloc_sbuf(8 * 4),
                 ones_off = b.alloc_sbuf(4);
  const uint64_t bank0 = b.alloc_psum_bank(), bank1 = b.alloc_psum_bank();
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  if (io.weight) {
    b.emit(qparam,
           isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, w_off, d), param_ap(*io.weight, 0, d, P)));
  }
  const Token params = b.mark(qparam);
  b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, P, ones_off, 1), 1.0f));
  b.emit(kVector, isa::memset(isa::sbuf(DType::kFp32, 0, 1, gw_off, {{1, d}}), 0.0f));
  b.emit(kVector, isa::memset(isa::sbuf(DType::kFp32, 0, 1, gb_off, {{1, d}}), 0.0f));
  const float inv_d = 1.0f / static_cast<float>(D);
  Token free_all;
  for (const RowTile& t : l.tiles) {
    const uint32_t p = t.rows;
    auto col = [&](int i) { return isa::sbuf_tile(DType::kFp32, p, s_off + i * 4, 1); };
    const AccessPattern mean = col(0), rstd = col(1), a = col(2), c = col(3), neg_mean = col(4);
    const AccessPattern x = isa::sbuf_tile(DType::kFp32, p, x_off, d),
                        g = isa::sbuf_tile(DType::kFp32, p, g_off, d),
                        h = isa::sbuf_tile(DType::kFp32, p, h_off, d),
                        tt = isa::sbuf_tile(DType::kFp32, p, t_off, d);
    const int64_t row0 = t.offset[1] / D;
    b.wait(qin, free_all);
    b.emit(qin, isa::dma_copy(x, row_ap(io.in, l, t, 1, 0, d)));
    b.emit(qin, isa::dma_copy(g, row_ap(io.grad_out, l, t, 0, 0, d)));
    b.emit(qin, isa::dma_copy(mean, row_stats_ap(io.mean, row0, p)));
    b.emit(qin, isa::dma_copy(rstd, row_stats_ap(io.rstd, row0, p)));
    b.wait(kVector, b.mark(qin));
    b.wait(kVector, params);
    b.wait(kVector, free_all);
    // xhat = (x - mean) * rstd; gxhat = g * w
    b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
    b.emit(kVector, isa::tensor_scalar(h, x, AluOp::kAdd, isa::per_partition(neg_mean),
                                       AluOp::kMultiply, isa::per_partition(rstd)));
    if (io.weight)
      b.emit(kVector, isa::tensor_tensor(tt, g, isa::sbuf_tile(DType::kFp32, p, w_off, d),
                                         AluOp::kMultiply));
    else
      b.emit(kVector, isa::tensor_copy(tt, g));
    // a = mean(gxhat), c = mean(gxhat * xhat)
    b.emit(kVector, isa::tensor_reduce(a, tt, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(x, tt, h, AluOp::kMultiply));  // x is free now
    b.emit(kVector, isa::tensor_reduce(c, x, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_scalar(a, a, AluOp::kMultiply, isa::imm(inv_d)));
    b.emit(kVector, isa::tensor_scalar(c, c, AluOp::kMultiply, isa::imm(inv_d)));
    // grad_in = rstd * (gxhat - a - xhat * c)
    b.emit(kVector, isa::tensor_scalar(x, h, AluOp::kMultiply, isa::per_partition(c)));
    b.emit(kVector, isa::tensor_tensor(x, tt, x, AluOp::kSubtract));
    b.emit(kVector, isa::tensor_scalar(x, x, AluOp::kSubtract, isa::per_partition(a),
                                       AluOp::kMultiply, isa::per_partition(rstd)));
    // g * xhat for grad_weight (reuse tt)
    b.emit(kVector, isa::tensor_tensor(tt, g, h, AluOp::kMultiply));
    const Token computed = b.mark(kVector);
    if (io.grad_in) {
      b.wait(qout, computed);
      b.emit(qout, isa::dma_copy(row_ap(*io.grad_in, l, t, 2, 0, d), x));
    }
    // Column sums over the rows on TensorE: ones^T @ M, 512 columns at a time.
    b.wait(kTensor, computed);
    for (uint32_t c0 = 0; c0 < d; c0 += NT) {
      const uint32_t cw = std::min(NT, d - c0);
      const AccessPattern ones = isa::sbuf_tile(DType::kFp32, p, ones_off, 1);
      b.emit(kTensor, isa::matmul(isa::psum_tile(DType::kFp32, 1, bank0, cw), ones,
                                  isa::sbuf_tile(DType::kFp32, p, t_off + c0 * 4, cw), false));
      b.emit(kTensor, isa::matmul(isa::psum_tile(DType::kFp32, 1, bank1, cw), ones,
                                  isa::sbuf_tile(DType::kFp32, p, g_off + c0 * 4, cw), false));
      const Token mm = b.mark(kTensor);
      b.wait(kVector, mm);
      b.emit(kVector, isa::tensor_tensor(isa::sbuf(DType::kFp32, 0, 1, gw_off + c0 * 4, {{1, cw}}),
                                         isa::sbuf(DType::kFp32, 0, 1, gw_off + c0 * 4, {{1, cw}}),
                                         isa::psum_tile(DType::kFp32, 1, bank0, cw), AluOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(isa::sbuf(DType::kFp32, 0, 1, gb_off + c0 * 4, {{1, cw}}),
                                         isa::sbuf(DType::kFp32, 0, 1, gb_off + c0 * 4, {{1, cw}}),
                                         isa::psum_tile(DType::kFp32, 1, bank1, cw), AluOp::kAdd));
      b.wait(kTensor, b.mark(kVector));
    }
    free_all = b.mark(kTensor);
    if (io.grad_in) {
      b.wait(kTensor, b.mark(qout));
      free_all = b.mark(kTensor);
    }
  }
  auto store_param_grad = [&](const TensorDesc& out, uint64_t off) {
    b.emit(qout,
           isa::dma_copy(param_ap(out, 0, d, 1), isa::sbuf(DType::kFp32, 0, 1, off, {{1, d}})));
  };
  b.wait(qout, b.mark(kVector));
  if (io.grad_weight) store_param_grad(*io.grad_weight, gw_off);
  if (io.grad_bias) store_param_grad(*io.grad_bias, gb_off);
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
