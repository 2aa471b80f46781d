#include "neuronsim/kernels/generators.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_eye(const std::string& name, const TensorDesc& out, const CoreParams& core) {
  if (out.dim() != 2) throw std::invalid_argument("eye: the output must have 2 dims");
  ProgramBuilder b(name, core);
  const int64_t R = out.sizes[0], C = out.sizes[1];
  const uint32_t P = core.sbuf.partitions;
  const uint32_t chunk = static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>(C, 8192)));
  const uint64_t m_off = b.alloc_sbuf(2 * uint64_t{chunk} * 4);
  const StreamId qout = dma_queue(0);
  Token slot_free[2];
  uint64_t n = 0;
  for (int64_t r0 = 0; r0 < R; r0 += P) {
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, R - r0));
    for (int64_t c0 = 0; c0 < C; c0 += chunk) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, C - c0));
      const int s = static_cast<int>(n++ % 2);
      const AccessPattern m = isa::sbuf_tile(DType::kFp32, p, m_off + s * uint64_t{chunk} * 4, cw);
      // m = col - row, then (m == 0).
      b.wait(kGpSimd, slot_free[s]);
      b.emit(kGpSimd, isa::iota(m, static_cast<int32_t>(c0 - r0), -1, {1}));
      b.wait(kVector, b.mark(kGpSimd));
      b.emit(kVector, isa::tensor_scalar(m, m, AluOp::kIsEqual, isa::imm(0.0f)));
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * out.strides[0] + c0 * out.strides[1], p,
                                        out.strides[0], {{out.strides[1], cw}}),
                                 m));
      slot_free[s] = b.mark(qout);
    }
  }
  return std::move(b).build();
}

Program build_linspace(const std::string& name, const TensorDesc& out, float start, float end,
                       float log_base, const CoreParams& core) {
  ProgramBuilder b(name, core);
  const int64_t n = static_cast<int64_t>(out.numel());
  if (n == 0) return std::move(b).build();
  if (n == 1) end = start;
  const float step = n > 1 ? (end - start) / static_cast<float>(n - 1) : 0.0f;
  const int64_t halfway = n / 2;
  const int64_t stride = out.strides.empty() ? 1 : out.strides[0];
  const uint32_t P = core.sbuf.partitions;
  const int64_t F = std::max<int64_t>(1, std::min<int64_t>((n + P - 1) / P, 4096));
  // Index, first-half value, second-half value, mask; two slots each.
  const uint64_t t_off = b.alloc_sbuf(2 * 4 * uint64_t(F) * 4);
  Token slot_free[2];
  for_each_row_block(n, F, P, [&](const RowBlock& blk) {
    const uint32_t p = blk.rows, cols = blk.cols;
    const int64_t first = blk.first;
    const int s = static_cast<int>(blk.index % 2);
    auto buf = [&](int i) {
      return isa::sbuf_tile(DType::kFp32, p, t_off + (s * 4 + i) * uint64_t(F) * 4, cols);
    };
    const AccessPattern idx = buf(0), lo = buf(1), hi = buf(2), mask = buf(3);
    b.wait(kGpSimd, slot_free[s]);
    b.emit(kGpSimd, isa::iota(idx, static_cast<int32_t>(first), static_cast<int32_t>(F), {1}));
    b.wait(kVector, b.mark(kGpSimd));
    b.wait(kVector, slot_free[s]);
    b.emit(kVector, isa::tensor_scalar(lo, idx, AluOp::kMultiply, isa::imm(step), AluOp::kAdd,
                                       isa::imm(start)));
    // hi = end - (n - 1 - i) * step, the negation folded into the constants (exact).
    b.emit(kVector, isa::tensor_scalar(hi, idx, AluOp::kMultiply, isa::imm(-1.0f), AluOp::kAdd,
                                       isa::imm(static_cast<float>(n - 1))));
    b.emit(kVector, isa::tensor_scalar(hi, hi, AluOp::kMultiply, isa::imm(-step), AluOp::kAdd,
                                       isa::imm(end)));
    b.emit(kVector,
           isa::tensor_scalar(mask, idx, AluOp::kIsLt, isa::imm(static_cast<float>(halfway))));
    b.emit(kVector, isa::select(lo, mask, lo, hi));
    Token ready = b.mark(kVector);
    if (log_base > 0.0f) {
      b.wait(kScalar, ready);
      b.emit(kScalar, isa::activation(lo, lo, ActFunc::kExp, isa::imm(std::log(log_base))));
      ready = b.mark(kScalar);
    }
    b.wait(dma_queue(0), ready);
    b.emit(dma_queue(0),
           isa::dma_copy(hbm_ap(out, first * stride, p, F * stride, {{stride, cols}}), lo));
    slot_free[s] = b.mark(dma_queue(0));
  });
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
