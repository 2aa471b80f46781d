#include "neuronsim/kernels/matmul.h"

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

uint32_t ceil_div(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}
// Stationary tiles per A^T load (4 x 128 columns): >= 1 KiB per partition per descriptor for
// 16-bit data, which keeps DMA descriptor overhead small (DMA-BW guide).
constexpr uint32_t kChunkTiles = 4;
// Staging for natural-layout operands: slots of up to 8 KiB per partition, three in flight so
// a stripe loads while the previous ones are transposed.
constexpr uint64_t kStageBytes = 8192;
constexpr uint32_t kStageSlots = 3;
constexpr int kTransposeBanks = 4;

AccessPattern hbm2(const TensorDesc& t, int64_t elem_offset, uint32_t rows, int64_t row_stride,
                   uint32_t cols, int64_t col_stride) {
  return hbm_ap(t, elem_offset, rows, row_stride, {{col_stride, cols}});
}

// Batch strides of a [..., R, C] tensor flattened over its leading dims.
struct Batched {
  std::vector<int64_t> sizes, strides;  // batch dims
  int64_t rs = 0, cs = 0;               // row and column strides
  int64_t rows = 0, cols = 0;
};

Batched split_batch(const TensorDesc& t) {
  if (t.dim() < 2) throw std::invalid_argument("matmul operands need at least 2 dims");
  Batched b;
  const size_t n = t.sizes.size();
  b.sizes.assign(t.sizes.begin(), t.sizes.end() - 2);
  b.strides.assign(t.strides.begin(), t.strides.end() - 2);
  b.rows = t.sizes[n - 2];
  b.cols = t.sizes[n - 1];
  b.rs = t.strides[n - 2];
  b.cs = t.strides[n - 1];
  return b;
}

int64_t batch_offset(const Batched& x, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t k = idx.size() - x.sizes.size();  // right-aligned
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    off += (x.sizes[d] == 1 ? 0 : idx[k + d]) * x.strides[d];
  }
  return off;
}

}  // namespace

Program build_matmul(const std::string& name, const TensorDesc& a, const TensorDesc& bt,
                     const TensorDesc& c, const std::optional<TensorDesc>& bias,
                     const MatmulSpec& spec, const CoreParams& core) {
  const Batched A = split_batch(a), B = split_batch(bt), C = split_batch(c);
  if (c.numel() == 0) return Program{name, {}, {}};
  const int64_t M = A.rows, K = A.cols, N = B.cols;
  if (B.rows != K || C.rows != M || C.cols != N) {
    throw std::invalid_argument(fmt::format("{}: shapes {} @ {} -> {} do not match", name,
                                            a.to_string(), bt.to_string(), c.to_string()));
  }
  // Bias as a [..., M, N] view of c's shape (stride 0 where broadcast).
  std::vector<int64_t> bias_strides(c.sizes.size(), 0);
  if (bias) {
    const size_t off = c.sizes.size() - bias->sizes.size();
    for (size_t d = 0; d < bias->sizes.size(); ++d) {
      bias_strides[off + d] = bias->sizes[d] == 1 ? 0 : bias->strides[d];
    }
  }
  const int64_t bias_rs = bias_strides[c.sizes.size() - 2], bias_cs = bias_strides.back();

  const uint32_t P = core.tensor.rows, MT = core.tensor.columns, NT = core.tensor.moving_free_max;
  const DType dt = a.dtype;
  const DType bdt = bt.dtype;
  const uint64_t es = dtype_size(dt), bes = dtype_size(bdt), oes = dtype_size(c.dtype);
  const uint32_t KT = ceil_div(static_cast<uint64_t>(std::max<int64_t>(K, 1)), P);

  ProgramBuilder b(name, core);
  const uint64_t b_slot = uint64_t{KT} * NT * bes;
  const uint64_t b_off = b.alloc_sbuf(2 * b_slot);
  const uint64_t tmp_off = b.alloc_sbuf(2 * uint64_t{NT} * 4);
  const uint64_t out_off = b.alloc_sbuf(2 * uint64_t{NT} * oes);
  const uint64_t bias_off = bias ? b.alloc_sbuf(2 * uint64_t{NT} * 4) : 0;
  // Natural operands arrive as row stripes of up to stripe_cols columns (kStageBytes per
  // partition per slot).
  const uint64_t stage_es = std::max(es, bes);
  const uint32_t stripe_cols = static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t{KT} * P, std::max<uint64_t>(P, kStageBytes / stage_es / P * P)));
  const uint64_t stage_slot = uint64_t{stripe_cols} * stage_es;
  const uint64_t stage_off = b.alloc_sbuf(kStageSlots * stage_slot);
  const uint64_t used = stage_off + kStageSlots * stage_slot;
  const uint64_t left = core.sbuf.partition_bytes > used ? core.sbuf.partition_bytes - used : 0;
  const uint32_t mb_cap = static_cast<uint32_t>(left / (uint64_t{KT} * es) / MT * MT);
  if (mb_cap == 0) {
    throw std::invalid_argument(
        fmt::format("{}: contraction {} too large for SBUF tiling", name, K));
  }
  const uint32_t MB = std::min<uint32_t>(mb_cap, ceil_div(static_cast<uint64_t>(M), MT) * MT);
  const uint64_t a_off = b.alloc_sbuf(uint64_t{KT} * MB * es);
  uint64_t acc_bank[4], tr_bank[kTransposeBanks];
  for (auto& x : acc_bank) x = b.alloc_psum_bank();
  for (auto& x : tr_bank) x = b.alloc_psum_bank();

  const StreamId qa = dma_queue(0), qb = dma_queue(1), qbias = dma_queue(2), qc = dma_queue(3);
  // A is "transposed-ready" when its M dim is contiguous; natural when its K dim is.
  // Otherwise (neither stride 1) the DMA gathers elements one by one: correct, and slow as it
  // would be on the device.
  const bool a_natural = !(A.rs == 1 || M == 1) && A.cs == 1;
  const bool b_natural = !(B.cs == 1 || N == 1) && B.rs == 1;
  const uint32_t k_tiles = K > 0 ? KT : 0;

  Token a_release, b_release[2], bank_release[4], tmp_release[2], out_release[2],
      stage_free[kStageSlots], tr_free[kTransposeBanks], bias_free[2];
  uint64_t b_count = 0, tile_count = 0, stage_count = 0, tr_count = 0;

  // Loads natural rows [rows <= 128, K] of an operand (K contiguous) in stripes, one DMA each,
  // and transposes them 128 columns at a time on TensorE (through PSUM; VectorE copies each
  // result to SBUF at dst_base + kt * dst_kt_stride). done[kt] is the copy of k tile kt.
  auto transpose_rows = [&](const TensorDesc& src, int64_t row_base, int64_t row_stride,
                            uint32_t rows, DType t, uint64_t dst_base, uint64_t dst_kt_stride,
                            StreamId q, const Token& dst_free, std::vector<Token>& done) {
    for (uint32_t s0 = 0; s0 < k_tiles * P; s0 += stripe_cols) {
      const uint32_t sw = static_cast<uint32_t>(std::min<int64_t>(stripe_cols, K - s0));
      const int s = static_cast<int>(stage_count++ % kStageSlots);
      const uint64_t slot_off = stage_off + s * stage_slot;
      b.wait(q, stage_free[s]);
      b.emit(q, isa::dma_copy(isa::sbuf_tile(t, rows, slot_off, sw),
                              hbm2(src, row_base + s0, rows, row_stride, sw, 1)));
      const Token loaded = b.mark(q);
      Token transposed;
      for (uint32_t k0 = 0; k0 < sw; k0 += P) {
        const uint32_t kt = (s0 + k0) / P, kp = std::min<uint32_t>(P, sw - k0);
        const int tb = static_cast<int>(tr_count++ % kTransposeBanks);
        const AccessPattern ps = isa::psum_tile(t, kp, tr_bank[tb], rows);
        b.wait(kTensor, loaded);
        b.wait(kTensor, tr_free[tb]);
        b.emit(kTensor, isa::transpose(ps, isa::sbuf_tile(t, rows, slot_off + k0 * stage_es, kp)));
        transposed = b.mark(kTensor);
        b.wait(kVector, transposed);
        b.wait(kVector, dst_free);
        b.emit(kVector,
               isa::tensor_copy(isa::sbuf_tile(t, kp, dst_base + kt * dst_kt_stride, rows), ps));
        tr_free[tb] = b.mark(kVector);
        done[kt] = tr_free[tb];
      }
      stage_free[s] = transposed;
    }
  };

  std::vector<int64_t> bidx(C.sizes.size(), 0);
  while (true) {
    const int64_t a_base = batch_offset(A, bidx), b_base = batch_offset(B, bidx),
                  c_base = batch_offset(C, bidx);
    int64_t bias_base = 0;
    for (size_t d = 0; d < bidx.size(); ++d) bias_base += bidx[d] * bias_strides[d];

    for (int64_t m0 = 0; m0 < M; m0 += MB) {
      const uint32_t mbw = static_cast<uint32_t>(std::min<int64_t>(MB, M - m0));
      const uint32_t chunk_cols = kChunkTiles * MT;
      std::vector<std::vector<Token>> a_tok(ceil_div(mbw, chunk_cols), std::vector<Token>(KT));
      b.wait(qa, a_release);
      b.wait(kVector, a_release);
      for (uint32_t c0 = 0; c0 < mbw; c0 += chunk_cols) {
        const uint32_t cw = std::min(chunk_cols, mbw - c0);
        for (uint32_t kt = 0; !a_natural && kt < k_tiles; ++kt) {
          const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
          const uint64_t dst_off = a_off + (uint64_t{kt} * MB + c0) * es;
          // A^T tile [kp, cw]: element (k, m) at a_base + (m0 + c0 + m) * rs + (kt*P + k) * cs.
          b.emit(qa, isa::dma_copy(isa::sbuf_tile(dt, kp, dst_off, cw),
                                   hbm2(a, a_base + (m0 + c0) * A.rs + int64_t{kt} * P * A.cs, kp,
                                        A.cs, cw, A.rs)));
          a_tok[c0 / chunk_cols][kt] = b.mark(qa);
        }
        if (a_natural) {
          for (uint32_t r0 = 0; r0 < cw; r0 += P) {
            transpose_rows(a, a_base + (m0 + c0 + r0) * A.rs, A.rs, std::min<uint32_t>(P, cw - r0),
                           dt, a_off + (c0 + r0) * es, uint64_t{MB} * es, qa, Token{},
                           a_tok[c0 / chunk_cols]);
          }
        }
      }

      for (int64_t n0 = 0; n0 < N; n0 += NT, ++b_count) {
        const uint32_t nw = static_cast<uint32_t>(std::min<int64_t>(NT, N - n0));
        const int slot = static_cast<int>(b_count % 2);
        const uint64_t slot_off = b_off + slot * b_slot;
        b.wait(qb, b_release[slot]);
        std::vector<Token> b_tok(KT);
        for (uint32_t kt = 0; !b_natural && kt < k_tiles; ++kt) {
          const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
          const uint64_t dst_off = slot_off + uint64_t{kt} * NT * bes;
          b.emit(qb, isa::dma_copy(isa::sbuf_tile(bdt, kp, dst_off, nw),
                                   hbm2(bt, b_base + int64_t{kt} * P * B.rs + n0 * B.cs, kp, B.rs,
                                        nw, B.cs)));
          b_tok[kt] = b.mark(qb);
        }
        if (b_natural) {
          for (uint32_t r0 = 0; r0 < nw; r0 += P) {
            transpose_rows(bt, b_base + (n0 + r0) * B.cs, B.cs, std::min<uint32_t>(P, nw - r0), bdt,
                           slot_off + r0 * bes, uint64_t{NT} * bes, qb, b_release[slot], b_tok);
          }
        }
        // A bias broadcast over rows is loaded once per N tile.
        Token bias_tok;
        const int bslot = static_cast<int>(b_count % 2);
        if (bias && bias_rs == 0) {
          b.wait(qbias, bias_free[bslot]);
          b.emit(qbias, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P,
                                                     bias_off + bslot * uint64_t{NT} * 4, nw),
                                      hbm2(*bias, bias_base + n0 * bias_cs, P, 0, nw, bias_cs)));
          bias_tok = b.mark(qbias);
        }

        Token last_mm;
        for (uint32_t mt = 0; mt < mbw; mt += MT, ++tile_count) {
          const uint32_t mw = std::min<uint32_t>(MT, mbw - mt);
          const int bank = static_cast<int>(tile_count % 4);
          const int ts = static_cast<int>(tile_count % 2);
          const AccessPattern acc = isa::psum_tile(DType::kFp32, mw, acc_bank[bank], nw);
          b.wait(kTensor, bank_release[bank]);
          for (uint32_t kt = 0; kt < k_tiles; ++kt) {
            const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
            b.wait(kTensor, a_tok[mt / chunk_cols][kt]);
            b.wait(kTensor, b_tok[kt]);
            const AccessPattern stat =
                isa::sbuf_tile(dt, kp, a_off + (uint64_t{kt} * MB + mt) * es, mw);
            const AccessPattern mov =
                isa::sbuf_tile(bdt, kp, slot_off + uint64_t{kt} * NT * bes, nw);
            b.emit(kTensor, isa::matmul(acc, stat, mov, kt > 0));
          }
          if (K == 0) b.emit(kVector, isa::memset(acc, 0.0f));
          last_mm = b.mark(kTensor);

          const AccessPattern tmp =
              isa::sbuf_tile(DType::kFp32, mw, tmp_off + ts * uint64_t{NT} * 4, nw);
          const AccessPattern out =
              isa::sbuf_tile(c.dtype, mw, out_off + ts * uint64_t{NT} * oes, nw);
          b.wait(kVector, last_mm);
          b.wait(kVector, tmp_release[ts]);
          b.emit(kVector, isa::tensor_scalar(tmp, acc, AluOp::kMultiply, isa::imm(spec.alpha)));
          if (bias) {
            AccessPattern bt_tile =
                isa::sbuf_tile(DType::kFp32, mw, bias_off + bslot * uint64_t{NT} * 4, nw);
            if (bias_rs != 0) {
              b.wait(qbias, bias_free[bslot]);
              b.emit(qbias, isa::dma_copy(
                                bt_tile, hbm2(*bias, bias_base + (m0 + mt) * bias_rs + n0 * bias_cs,
                                              mw, bias_rs, nw, bias_cs)));
              bias_tok = b.mark(qbias);
            }
            b.wait(kVector, bias_tok);
            if (spec.beta != 1.0f) {
              b.emit(kVector,
                     isa::tensor_scalar(bt_tile, bt_tile, AluOp::kMultiply, isa::imm(spec.beta)));
            }
            b.emit(kVector, isa::tensor_tensor(tmp, tmp, bt_tile, AluOp::kAdd));
          }
          const Token v_tok = b.mark(kVector);
          bank_release[bank] = v_tok;
          if (bias) bias_free[bslot] = v_tok;

          b.wait(kScalar, v_tok);
          b.wait(kScalar, out_release[ts]);
          b.emit(kScalar, isa::activation(out, tmp, spec.epilogue));
          const Token s_tok = b.mark(kScalar);
          tmp_release[ts] = s_tok;

          b.wait(qc, s_tok);
          b.emit(qc, isa::dma_copy(
                         hbm2(c, c_base + (m0 + mt) * C.rs + n0 * C.cs, mw, C.rs, nw, C.cs), out));
          out_release[ts] = b.mark(qc);
        }
        b_release[slot] = last_mm;
      }
      a_release = b.mark(kTensor);
    }
    // Next batch index (odometer); done when it wraps around.
    size_t d = bidx.size();
    while (d > 0 && ++bidx[d - 1] == C.sizes[d - 1]) bidx[--d] = 0;
    if (d == 0) break;
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
