#include "neuronsim/kernels/gemm.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/device/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device;
using Token = ProgramBuilder::Token;

namespace {
// Stationary tiles per A^T load: 4 x 128 bf16 columns = 1 KiB per partition per descriptor,
// enough to keep DMA descriptor overhead small (DMA-BW: >= 1-2 KiB per partition).
constexpr uint32_t kChunkTiles = 4;
uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }
}  // namespace

Program build_gemm(const GemmSpec& s, const GemmAddresses& addr, const CoreParams& core) {
  if (s.m == 0 || s.k == 0 || s.n == 0) throw std::invalid_argument("gemm: empty shape");
  const uint32_t P = core.tensor.rows;            // contraction tile
  const uint32_t MT = core.tensor.columns;        // stationary tile
  const uint32_t NT = core.tensor.moving_free_max;  // moving tile
  const uint64_t es = dtype_size(s.in_dtype), oes = dtype_size(s.out_dtype);
  const uint32_t KT = ceil_div(s.k, P);
  const uint32_t num_n = ceil_div(s.n, NT);

  ProgramBuilder b(fmt::format("gemm_{}x{}x{}", s.m, s.k, s.n), core);
  b.add_hbm_region("a_t", addr.a_t, uint64_t{s.k} * s.m * es);
  b.add_hbm_region("b", addr.b, uint64_t{s.k} * s.n * es);
  if (s.bias) b.add_hbm_region("bias", addr.bias, uint64_t{s.n} * es);
  b.add_hbm_region("c", addr.c, uint64_t{s.m} * s.n * oes);

  // SBUF plan (bytes per partition).
  const uint64_t b_slot_bytes = uint64_t{KT} * NT * es;
  const uint64_t b_off = b.alloc_sbuf(2 * b_slot_bytes);
  const uint64_t bias_off = s.bias ? b.alloc_sbuf(uint64_t{s.n} * es) : 0;
  const uint64_t tmp_off = b.alloc_sbuf(2 * uint64_t{NT} * 4);
  const uint64_t out_off = b.alloc_sbuf(2 * uint64_t{NT} * oes);
  // What is left holds an M block of A^T: KT tiles of [P, MB].
  const uint64_t used = out_off + 2 * uint64_t{NT} * oes;
  const uint64_t left = core.sbuf.partition_bytes > used ? core.sbuf.partition_bytes - used : 0;
  const uint32_t mb_cap = static_cast<uint32_t>(left / (uint64_t{KT} * es) / MT * MT);
  if (mb_cap == 0) {
    throw std::invalid_argument(fmt::format(
        "gemm: k={} is too large for the SBUF tiling ({} bytes per partition)", s.k,
        core.sbuf.partition_bytes));
  }
  const uint32_t MB = std::min<uint32_t>(mb_cap, ceil_div(s.m, MT) * MT);
  const uint64_t a_off = b.alloc_sbuf(uint64_t{KT} * MB * es);
  uint64_t banks[4];
  for (auto& bank : banks) bank = b.alloc_psum_bank();

  const StreamId qa = dma_queue(0), qb = dma_queue(1), qbias = dma_queue(2), qc = dma_queue(3);

  Token bias_tok;
  if (s.bias) {
    b.emit(qbias, isa::dma_copy(isa::sbuf_tile(s.in_dtype, P, bias_off, s.n),
                                isa::hbm_rows(s.in_dtype, addr.bias, P, s.n, 0)));
    bias_tok = b.mark(qbias);
  }

  Token a_release, b_release[2], bank_release[4], tmp_release[2], out_release[2];
  uint64_t b_count = 0, tile_count = 0;
  for (uint32_t m0 = 0; m0 < s.m; m0 += MB) {
    const uint32_t mbw = std::min(MB, s.m - m0);
    // A^T streams in column chunks of kChunkTiles stationary tiles, each chunk kt by kt, so the
    // first matmuls start after one tile instead of after the whole block.
    b.wait(qa, a_release);
    const uint32_t chunk_cols = kChunkTiles * MT;
    std::vector<std::vector<Token>> a_tok(ceil_div(mbw, chunk_cols), std::vector<Token>(KT));
    for (uint32_t c0 = 0; c0 < mbw; c0 += chunk_cols) {
      const uint32_t cw = std::min(chunk_cols, mbw - c0);
      for (uint32_t kt = 0; kt < KT; ++kt) {
        const uint32_t kp = std::min(P, s.k - kt * P);
        const uint64_t src = addr.a_t + (uint64_t{kt} * P * s.m + m0 + c0) * es;
        b.emit(qa, isa::dma_copy(
                       isa::sbuf_tile(s.in_dtype, kp, a_off + (uint64_t{kt} * MB + c0) * es, cw),
                       isa::hbm_rows(s.in_dtype, src, kp, cw, s.m)));
        a_tok[c0 / chunk_cols][kt] = b.mark(qa);
      }
    }

    for (uint32_t nt = 0; nt < num_n; ++nt, ++b_count) {
      const uint32_t n0 = nt * NT, nw = std::min(NT, s.n - n0);
      const int slot = static_cast<int>(b_count % 2);
      const uint64_t slot_off = b_off + slot * b_slot_bytes;
      b.wait(qb, b_release[slot]);
      for (uint32_t kt = 0; kt < KT; ++kt) {
        const uint32_t kp = std::min(P, s.k - kt * P);
        const uint64_t src = addr.b + (uint64_t{kt} * P * s.n + n0) * es;
        b.emit(qb, isa::dma_copy(isa::sbuf_tile(s.in_dtype, kp, slot_off + uint64_t{kt} * NT * es, nw),
                                 isa::hbm_rows(s.in_dtype, src, kp, nw, s.n)));
      }
      const Token b_tok = b.mark(qb);

      Token last_mm;
      for (uint32_t mt = 0; mt < mbw; mt += MT, ++tile_count) {
        const uint32_t mw = std::min(MT, mbw - mt);
        const int bank = static_cast<int>(tile_count % 4);
        const int ts = static_cast<int>(tile_count % 2);
        const AccessPattern acc = isa::psum_tile(DType::kFp32, mw, banks[bank], nw);

        b.wait(kTensor, b_tok);
        b.wait(kTensor, bank_release[bank]);
        for (uint32_t kt = 0; kt < KT; ++kt) {
          b.wait(kTensor, a_tok[mt / chunk_cols][kt]);
          const uint32_t kp = std::min(P, s.k - kt * P);
          const AccessPattern stat =
              isa::sbuf_tile(s.in_dtype, kp, a_off + (uint64_t{kt} * MB + mt) * es, mw);
          const AccessPattern mov = isa::sbuf_tile(s.in_dtype, kp, slot_off + uint64_t{kt} * NT * es, nw);
          b.emit(kTensor, isa::matmul(acc, stat, mov, kt > 0));
        }
        last_mm = b.mark(kTensor);

        // Epilogue: VectorE drains PSUM (+ bias) into fp32 SBUF; ScalarE applies the
        // activation and narrows; a DMA queue stores the tile.
        const AccessPattern tmp = isa::sbuf_tile(DType::kFp32, mw, tmp_off + ts * uint64_t{NT} * 4, nw);
        const AccessPattern out = isa::sbuf_tile(s.out_dtype, mw, out_off + ts * uint64_t{NT} * oes, nw);
        b.wait(kVector, last_mm);
        b.wait(kVector, tmp_release[ts]);
        if (s.bias) {
          b.wait(kVector, bias_tok);
          b.emit(kVector, isa::tensor_tensor(tmp, acc,
                                             isa::sbuf_tile(s.in_dtype, mw, bias_off + n0 * es, nw),
                                             AluOp::kAdd));
        } else {
          b.emit(kVector, isa::tensor_copy(tmp, acc));
        }
        const Token v_tok = b.mark(kVector);
        bank_release[bank] = v_tok;

        b.wait(kScalar, v_tok);
        b.wait(kScalar, out_release[ts]);
        b.emit(kScalar, isa::activation(out, tmp, s.epilogue));
        const Token s_tok = b.mark(kScalar);
        tmp_release[ts] = s_tok;

        b.wait(qc, s_tok);
        b.emit(qc, isa::dma_copy(isa::hbm_rows(s.out_dtype, addr.c + (uint64_t{m0 + mt} * s.n + n0) * oes,
                                               mw, nw, s.n),
                                 out));
        out_release[ts] = b.mark(qc);
      }
      b_release[slot] = last_mm;
    }
    a_release = b.mark(kTensor);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
