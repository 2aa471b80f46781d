#include "neuronsim/kernels/layernorm.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device;
using Token = ProgramBuilder::Token;

Program build_layernorm(const LayerNormSpec& s, const LayerNormAddresses& addr,
                        const CoreParams& core) {
  if (s.rows == 0 || s.dim == 0) throw std::invalid_argument("layernorm: empty shape");
  const uint32_t P = core.sbuf.partitions;
  const uint64_t es = dtype_size(s.dtype);
  const uint32_t D = s.dim;
  ProgramBuilder b(fmt::format("layernorm_{}x{}", s.rows, s.dim), core);
  b.add_hbm_region("x", addr.x, uint64_t{s.rows} * D * es);
  b.add_hbm_region("gamma", addr.gamma, uint64_t{D} * es);
  b.add_hbm_region("beta", addr.beta, uint64_t{D} * es);
  b.add_hbm_region("y", addr.y, uint64_t{s.rows} * D * es);

  const uint64_t gamma_off = b.alloc_sbuf(uint64_t{D} * 4);
  const uint64_t beta_off = b.alloc_sbuf(uint64_t{D} * 4);
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t{D} * 4);
  const uint64_t y_off = b.alloc_sbuf(2 * uint64_t{D} * es);
  const uint64_t sq_off = b.alloc_sbuf(uint64_t{D} * 4);
  const uint64_t stats_off = b.alloc_sbuf(2 * 4 * 4);  // per slot: sum, -mean, ssq, rstd

  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  // gamma and beta broadcast to every partition (row stride 0), widened to fp32 by the DMA.
  b.emit(qparam, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, gamma_off, D),
                               isa::hbm_rows(s.dtype, addr.gamma, P, D, 0)));
  b.emit(qparam, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, beta_off, D),
                               isa::hbm_rows(s.dtype, addr.beta, P, D, 0)));
  const Token params = b.mark(qparam);

  Token x_release[2], y_release[2];
  uint32_t tile = 0;
  for (uint32_t r0 = 0; r0 < s.rows; r0 += P, ++tile) {
    const uint32_t rp = std::min(P, s.rows - r0);
    const int slot = static_cast<int>(tile % 2);
    const AccessPattern x = isa::sbuf_tile(DType::kFp32, rp, x_off + slot * uint64_t{D} * 4, D);
    const AccessPattern y = isa::sbuf_tile(s.dtype, rp, y_off + slot * uint64_t{D} * es, D);
    auto stat = [&](int i) {
      return isa::sbuf_tile(DType::kFp32, rp, stats_off + (slot * 4 + i) * 4, 1);
    };
    const AccessPattern sum = stat(0), neg_mean = stat(1), ssq = stat(2), rstd = stat(3);

    b.wait(qin, x_release[slot]);
    b.emit(qin, isa::dma_copy(x, isa::hbm_rows(s.dtype, addr.x + uint64_t{r0} * D * es, rp, D, D)));
    const Token x_tok = b.mark(qin);

    b.wait(kVector, x_tok);
    b.emit(kVector, isa::tensor_reduce(sum, x, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_scalar(neg_mean, sum, AluOp::kMultiply, isa::imm(-1.0f / D)));
    const Token mean_tok = b.mark(kVector);

    b.wait(kScalar, mean_tok);
    Instruction sq =
        isa::activation(isa::sbuf_tile(DType::kFp32, rp, sq_off, D), x, ActFunc::kSquare,
                        isa::imm(1.0f), isa::per_partition(neg_mean));
    sq.acc_dst = ssq;
    sq.has_acc_dst = true;
    b.emit(kScalar, sq);
    // rstd = rsqrt(ssq / D + eps) in one activation: func(in * scale + bias).
    b.emit(kScalar,
           isa::activation(rstd, ssq, ActFunc::kRsqrt, isa::imm(1.0f / D), isa::imm(s.eps)));
    const Token rstd_tok = b.mark(kScalar);

    b.wait(kVector, rstd_tok);
    b.wait(kVector, params);
    b.wait(kVector, y_release[slot]);
    b.emit(kVector, isa::tensor_scalar(x, x, AluOp::kAdd, isa::per_partition(neg_mean),
                                       AluOp::kMultiply, isa::per_partition(rstd)));
    b.emit(kVector, isa::tensor_tensor(x, x, isa::sbuf_tile(DType::kFp32, rp, gamma_off, D),
                                       AluOp::kMultiply));
    b.emit(kVector,
           isa::tensor_tensor(y, x, isa::sbuf_tile(DType::kFp32, rp, beta_off, D), AluOp::kAdd));
    const Token v_tok = b.mark(kVector);
    x_release[slot] = v_tok;

    b.wait(qout, v_tok);
    b.emit(qout,
           isa::dma_copy(isa::hbm_rows(s.dtype, addr.y + uint64_t{r0} * D * es, rp, D, D), y));
    y_release[slot] = b.mark(qout);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
