#include "neuronsim/kernels/scalesim_gemm.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_gemm_weight_stationary(const GemmSpec& s, const GemmAddresses& addr,
                                     const CoreParams& core) {
  if (s.m == 0 || s.k == 0 || s.n == 0) throw std::invalid_argument("gemm: empty shape");
  if (s.bias || s.epilogue != ActFunc::kCopy) {
    throw std::invalid_argument("weight-stationary gemm: no bias or epilogue");
  }
  const uint32_t P = core.tensor.rows, C = core.tensor.columns, T = core.tensor.moving_free_max;
  const uint32_t M = s.m, K = s.k, N = s.n;
  const uint64_t es = dtype_size(s.in_dtype), oes = dtype_size(s.out_dtype);
  const uint32_t kts = (K + P - 1) / P, nts = (N + C - 1) / C, mts = (M + T - 1) / T;
  const bool psum_acc = mts <= core.psum.banks;  // all of M accumulates in PSUM across folds
  ProgramBuilder b(fmt::format("gemm_ws_{}x{}x{}", M, K, N), core);
  // SBUF: two rows of A^T [k, M] (one per k tile, alternating), two B tiles, the SBUF
  // accumulator [n, M] fp32 when PSUM cannot hold M, two output tiles.
  const uint64_t a_off = b.alloc_sbuf(2 * uint64_t{M} * es);
  const uint64_t w_off = b.alloc_sbuf(2 * uint64_t{C} * es);
  const uint64_t acc_off = psum_acc ? 0 : b.alloc_sbuf(uint64_t{M} * 4);
  const uint64_t out_off = b.alloc_sbuf(2 * uint64_t{T} * oes);
  std::vector<uint64_t> bank;
  for (uint32_t i = 0; i < std::min<uint32_t>(mts, core.psum.banks); ++i) {
    bank.push_back(b.alloc_psum_bank());
  }
  const StreamId qa[2] = {dma_queue(0), dma_queue(1)}, qw = dma_queue(2), qc = dma_queue(3);
  Token a_free[2], w_free[2], out_free[2], acc_free, vec_last;
  std::vector<Token> bank_free(bank.size());
  uint32_t fold = 0, outs = 0;
  for (uint32_t nt = 0; nt < nts; ++nt) {
    const uint32_t nw = std::min(C, N - nt * C);
    for (uint32_t kt = 0; kt < kts; ++kt, ++fold) {
      const uint32_t kp = std::min(P, K - kt * P), slot = fold % 2;
      // A^T rows [kp, M] and B's tile [kp, nw] of this fold.
      b.wait(qa[slot], a_free[slot]);
      b.emit(qa[slot], isa::dma_copy(isa::sbuf_tile(s.in_dtype, kp, a_off + slot * M * es, M),
                                     isa::hbm_rows(s.in_dtype, addr.a_t + uint64_t{kt} * P * M * es,
                                                   kp, M, M)));
      const Token a_in = b.mark(qa[slot]);
      b.wait(qw, w_free[slot]);
      b.emit(qw,
             isa::dma_copy(isa::sbuf_tile(s.in_dtype, kp, w_off + slot * C * es, nw),
                           isa::hbm_rows(s.in_dtype, addr.b + (uint64_t{kt} * P * N + nt * C) * es,
                                         kp, nw, N)));
      const Token w_in = b.mark(qw);
      b.wait(kTensor, a_in);
      b.wait(kTensor, w_in);
      const AccessPattern stat = isa::sbuf_tile(s.in_dtype, kp, w_off + slot * C * es, nw);
      Token mm_done;
      for (uint32_t mt = 0; mt < mts; ++mt) {
        const uint32_t mw = std::min(T, M - mt * T), bk = mt % bank.size();
        b.wait(kTensor, bank_free[bk]);
        b.emit(kTensor,
               isa::matmul(isa::psum_tile(DType::kFp32, nw, bank[bk], mw), stat,
                           isa::sbuf_tile(s.in_dtype, kp, a_off + (slot * M + mt * T) * es, mw),
                           psum_acc && kt > 0));
        if (psum_acc) continue;
        // M exceeds PSUM: VectorE folds each partial product into the SBUF accumulator.
        mm_done = b.mark(kTensor);
        const AccessPattern acc = isa::sbuf_tile(DType::kFp32, nw, acc_off + mt * T * 4ull, mw);
        const AccessPattern ps = isa::psum_tile(DType::kFp32, nw, bank[bk], mw);
        b.wait(kVector, mm_done);
        if (kt == 0) b.wait(kVector, acc_free);
        b.emit(kVector,
               kt == 0 ? isa::tensor_copy(acc, ps) : isa::tensor_tensor(acc, acc, ps, AluOp::kAdd));
        vec_last = bank_free[bk] = b.mark(kVector);
      }
      const Token fold_done = b.mark(kTensor);
      a_free[slot] = w_free[slot] = fold_done;
      if (kt + 1 < kts) continue;
      // C^T rows [nw, M] of this column of B's tiles: evacuate and store.
      for (uint32_t mt = 0; mt < mts; ++mt) {
        const uint32_t mw = std::min(T, M - mt * T), os = outs++ % 2;
        const AccessPattern out = isa::sbuf_tile(s.out_dtype, nw, out_off + os * T * oes, mw);
        const AccessPattern src =
            psum_acc ? isa::psum_tile(DType::kFp32, nw, bank[mt], mw)
                     : isa::sbuf_tile(DType::kFp32, nw, acc_off + mt * T * 4ull, mw);
        b.wait(kScalar, psum_acc ? fold_done : vec_last);
        b.wait(kScalar, out_free[os]);
        b.emit(kScalar, isa::activation(out, src, ActFunc::kCopy));
        const Token evac = b.mark(kScalar);
        if (psum_acc) bank_free[mt] = evac;
        acc_free = evac;
        b.wait(qc, evac);
        b.emit(qc, isa::dma_copy(
                       isa::hbm_rows(s.out_dtype, addr.c + (uint64_t{nt} * C * M + mt * T) * oes,
                                     nw, mw, M),
                       out));
        out_free[os] = b.mark(qc);
      }
    }
  }
  Program p = std::move(b).build();
  p.hbm_regions = {{"a_t", addr.a_t, uint64_t{K} * M * es},
                   {"b", addr.b, uint64_t{K} * N * es},
                   {"c_t", addr.c, uint64_t{M} * N * oes}};
  return p;
}

}  // namespace neuronsim::kernels
