#include "neuronsim/kernels/softmax.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/rows.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_softmax(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                      int64_t dim, bool log, const CoreParams& core) {
  ProgramBuilder b(name, core);
  const RowLayout l = row_layout(out.sizes, {broadcast_strides(in, out.sizes), out.strides}, dim,
                                 core.sbuf.partitions);
  const uint32_t chunk = row_chunk(core, 4, l.cols);
  const bool one_pass = chunk >= l.cols;
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t{chunk} * 4);
  const uint64_t y_off = b.alloc_sbuf(2 * uint64_t{chunk} * 4);
  const uint64_t s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token x_free[2], y_free[2], stats_free;
  uint64_t n = 0;
  for (const RowTile& t : l.tiles) {
    const uint32_t p = t.rows;
    auto col = [&](int i) { return isa::sbuf_tile(DType::kFp32, p, s_off + i * 4, 1); };
    const AccessPattern m = col(0), part = col(1), neg_m = col(2), sum = col(3), r = col(4),
                        shift = col(5);
    b.wait(kVector, stats_free);
    b.wait(kScalar, stats_free);
    auto load = [&](int64_t c0, uint32_t cw) {
      const int s = static_cast<int>(n++ % 2);
      const AccessPattern x = isa::sbuf_tile(DType::kFp32, p, x_off + s * uint64_t{chunk} * 4, cw);
      b.wait(qin, x_free[s]);
      b.emit(qin, isa::dma_copy(x, row_ap(in, l, t, 0, c0, cw)));
      return std::pair<AccessPattern, int>{x, s};
    };
    // Pass 1: row max. Pass 2: sum of exp(x - max). Pass 3 (or fused): outputs.
    for (int64_t c0 = 0; c0 < l.cols; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, l.cols - c0));
      auto [x, s] = load(c0, cw);
      b.wait(kVector, b.mark(qin));
      b.emit(kVector, isa::tensor_reduce(c0 == 0 ? m : part, x, ReduceOp::kMax));
      if (c0 > 0) b.emit(kVector, isa::tensor_tensor(m, m, part, AluOp::kMax));
      x_free[s] = b.mark(kVector);
      if (one_pass) x_free[s] = Token{};  // reused below before release
    }
    b.emit(kVector, isa::tensor_scalar(neg_m, m, AluOp::kMultiply, isa::imm(-1.0f)));
    const Token have_max = b.mark(kVector);
    for (int64_t c0 = 0; c0 < l.cols; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, l.cols - c0));
      AccessPattern x =
          isa::sbuf_tile(DType::kFp32, p, x_off + ((n - 1) % 2) * uint64_t{chunk} * 4, cw);
      int s = static_cast<int>((n - 1) % 2);
      if (!one_pass) std::tie(x, s) = load(c0, cw);
      const Token loaded = b.mark(qin);
      const int ys = static_cast<int>(n % 2);
      const AccessPattern y = isa::sbuf_tile(DType::kFp32, p, y_off + ys * uint64_t{chunk} * 4, cw);
      b.wait(kScalar, loaded);
      b.wait(kScalar, have_max);
      b.wait(kScalar, y_free[ys]);
      Instruction e =
          isa::activation(y, x, ActFunc::kExp, isa::imm(1.0f), isa::per_partition(neg_m));
      e.has_acc_dst = true;
      e.acc_dst = c0 == 0 ? sum : part;
      b.emit(kScalar, e);
      const Token exp_done = b.mark(kScalar);
      if (c0 > 0) {
        b.wait(kVector, exp_done);
        b.emit(kVector, isa::tensor_tensor(sum, sum, part, AluOp::kAdd));
      }
      if (!one_pass) {
        x_free[s] = exp_done;
        y_free[ys] = exp_done;
      }
    }
    const Token summed = l.cols > chunk ? b.mark(kVector) : b.mark(kScalar);
    // Normalise: y = exp(x - m) / sum, or log_softmax = x - (m + log(sum)).
    b.wait(kScalar, summed);
    b.wait(kVector, summed);
    if (log) {
      b.emit(kScalar, isa::activation(r, sum, ActFunc::kLog));
      const Token lg = b.mark(kScalar);
      b.wait(kVector, lg);
      b.emit(kVector, isa::tensor_tensor(shift, m, r, AluOp::kAdd));
    } else {
      Instruction recip = isa::tensor_scalar(r, sum, AluOp::kDivide, isa::imm(1.0f));
      recip.reverse0 = true;  // 1 / sum
      b.emit(kVector, recip);
    }
    Token last;
    for (int64_t c0 = 0; c0 < l.cols; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, l.cols - c0));
      const int ys = static_cast<int>(n % 2);
      AccessPattern x =
          isa::sbuf_tile(DType::kFp32, p, x_off + ((n - 1) % 2) * uint64_t{chunk} * 4, cw);
      AccessPattern y = isa::sbuf_tile(DType::kFp32, p, y_off + ys * uint64_t{chunk} * 4, cw);
      if (!one_pass) {
        auto lx = load(c0, cw);
        x = lx.first;
        b.wait(kVector, b.mark(qin));
        b.wait(kVector, y_free[ys]);
        b.wait(kScalar, y_free[ys]);
        if (!log) {
          b.emit(kScalar,
                 isa::activation(y, x, ActFunc::kExp, isa::imm(1.0f), isa::per_partition(neg_m)));
          b.wait(kVector, b.mark(kScalar));
        }
        x_free[lx.second] = Token{};
      }
      if (log) {
        b.emit(kVector, isa::tensor_scalar(y, x, AluOp::kSubtract, isa::per_partition(shift)));
      } else {
        b.emit(kVector, isa::tensor_scalar(y, y, AluOp::kMultiply, isa::per_partition(r)));
      }
      const Token done = b.mark(kVector);
      b.wait(qout, done);
      b.emit(qout, isa::dma_copy(row_ap(out, l, t, 1, c0, cw), y));
      last = b.mark(qout);
      y_free[ys] = last;
      x_free[0] = x_free[1] = last;
    }
    stats_free = last;
  }
  return std::move(b).build();
}

Program build_softmax_backward(const std::string& name, const TensorDesc& g, const TensorDesc& y,
                               const TensorDesc& gi, int64_t dim, bool log,
                               const CoreParams& core) {
  ProgramBuilder b(name, core);
  const RowLayout l = row_layout(
      gi.sizes, {broadcast_strides(g, gi.sizes), broadcast_strides(y, gi.sizes), gi.strides}, dim,
      core.sbuf.partitions);
  const uint32_t chunk = row_chunk(core, 6, l.cols);
  const uint64_t g_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 y_off = b.alloc_sbuf(uint64_t{chunk} * 4),
                 w_off = b.alloc_sbuf(uint64_t{chunk} * 4), s_off = b.alloc_sbuf(4 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token free_all;
  for (const RowTile& t : l.tiles) {
    const uint32_t p = t.rows;
    const AccessPattern s = isa::sbuf_tile(DType::kFp32, p, s_off, 1),
                        part = isa::sbuf_tile(DType::kFp32, p, s_off + 4, 1);
    // Pass 1: s = sum(g * y) (softmax) or sum(g) (log_softmax).
    for (int64_t c0 = 0; c0 < l.cols; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, l.cols - c0));
      const AccessPattern gt = isa::sbuf_tile(DType::kFp32, p, g_off, cw),
                          yt = isa::sbuf_tile(DType::kFp32, p, y_off, cw),
                          w = isa::sbuf_tile(DType::kFp32, p, w_off, cw);
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(gt, row_ap(g, l, t, 0, c0, cw)));
      if (!log) b.emit(qin, isa::dma_copy(yt, row_ap(y, l, t, 1, c0, cw)));
      b.wait(kVector, b.mark(qin));
      b.wait(kVector, free_all);
      if (log) {
        b.emit(kVector, isa::tensor_reduce(c0 == 0 ? s : part, gt, ReduceOp::kAdd));
      } else {
        b.emit(kVector, isa::tensor_tensor(w, gt, yt, AluOp::kMultiply));
        b.emit(kVector, isa::tensor_reduce(c0 == 0 ? s : part, w, ReduceOp::kAdd));
      }
      if (c0 > 0) b.emit(kVector, isa::tensor_tensor(s, s, part, AluOp::kAdd));
      free_all = b.mark(kVector);
    }
    // Pass 2: outputs.
    for (int64_t c0 = 0; c0 < l.cols; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, l.cols - c0));
      const AccessPattern gt = isa::sbuf_tile(DType::kFp32, p, g_off, cw),
                          yt = isa::sbuf_tile(DType::kFp32, p, y_off, cw),
                          w = isa::sbuf_tile(DType::kFp32, p, w_off, cw);
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(gt, row_ap(g, l, t, 0, c0, cw)));
      b.emit(qin, isa::dma_copy(yt, row_ap(y, l, t, 1, c0, cw)));
      const Token loaded = b.mark(qin);
      if (log) {
        b.wait(kScalar, loaded);
        b.wait(kScalar, free_all);
        b.emit(kScalar, isa::activation(w, yt, ActFunc::kExp));
        b.wait(kVector, b.mark(kScalar));
        b.emit(kVector, isa::tensor_scalar(w, w, AluOp::kMultiply, isa::per_partition(s)));
        b.emit(kVector, isa::tensor_tensor(w, gt, w, AluOp::kSubtract));
      } else {
        b.wait(kVector, loaded);
        b.emit(kVector, isa::tensor_scalar(w, gt, AluOp::kSubtract, isa::per_partition(s)));
        b.emit(kVector, isa::tensor_tensor(w, w, yt, AluOp::kMultiply));
      }
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(row_ap(gi, l, t, 2, c0, cw), w));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
