// Weight and bias gradients of a convolution. The weight gradient contracts over output
// positions, so both operands go to position-major tiles: each block of <= 128 output positions
// of a_t is transposed once, the matching window of b_t's padded band once per tap, and one
// matmul per tap accumulates [Ca, Cb] into PSUM over every image and block.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "conv_shifted.h"
#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels::conv {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

constexpr int kTrSlots = 8;  // transpose outputs: two PSUM banks of four 512-byte slots
constexpr int kAccBanksWg = 6;

// a-channels [a0, a0 + a_w) against b-channels [b0, b0 + b_w); ng > 1: groups g0.. packed, the
// gradient being the diagonal blocks of the product.
struct WgBlock {
  int64_t g0 = 0, ng = 1, a0 = 0, a_w = 0, b0 = 0, b_w = 0;
};

std::vector<WgBlock> wg_blocks(int64_t G, int64_t ca_g, int64_t cb_g, uint32_t P, uint32_t NT) {
  std::vector<WgBlock> out;
  const int64_t pack =
      G > 1 ? std::max<int64_t>(
                  1, std::min({G, P / std::max<int64_t>(ca_g, 1), P / std::max<int64_t>(cb_g, 1)}))
            : 1;
  if (pack > 1) {
    for (int64_t g0 = 0; g0 < G; g0 += pack) {
      const int64_t ng = std::min(pack, G - g0);
      out.push_back({g0, ng, g0 * ca_g, ng * ca_g, g0 * cb_g, ng * cb_g});
    }
    return out;
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t a = 0; a < ca_g; a += P)
      for (int64_t c = 0; c < cb_g; c += NT)
        out.push_back({g, 1, g * ca_g + a, std::min<int64_t>(P, ca_g - a), g * cb_g + c,
                       std::min<int64_t>(NT, cb_g - c)});
  return out;
}

// Taps stacked on the partitions: a block of at most P / 2 b-channels in one sub-tile is loaded
// R times, copy j shifted by j taps along the innermost axis, so one transpose and one matmul
// serve R taps (ResNet's 3-channel stem: 7 taps each instead of 1).
int64_t wg_replicas(const Axes& ax, uint32_t b_w, uint32_t P) {
  if (b_w == 0 || b_w > P) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(ax[2].kernel, P / b_w));
}

// Taps (k0, k1, k2 .. k2 + count - 1), flat index first .. first + count - 1.
struct WgTaps {
  std::array<int64_t, 3> tap{};
  int64_t first = 0, count = 1;
};

std::vector<WgTaps> wg_tap_groups(const Axes& ax, int64_t R) {
  std::vector<WgTaps> g;
  for (int64_t k0 = 0; k0 < ax[0].kernel; ++k0)
    for (int64_t k1 = 0; k1 < ax[1].kernel; ++k1)
      for (int64_t k2 = 0; k2 < ax[2].kernel; k2 += R)
        g.push_back({{k0, k1, k2},
                     (k0 * ax[1].kernel + k1) * ax[2].kernel + k2,
                     std::min(R, ax[2].kernel - k2)});
  return g;
}

// a_t seen as a convolution input read with a 1x1 kernel: the band of the same output rows.
Axes a_axes(const Axes& ax) {
  Axes a;
  for (int x = 0; x < 3; ++x) a[x] = Axis{ax[x].out, ax[x].out, 1, 1, 1, 1, 0};
  return a;
}

Band a_band(const Axes& aa, const Band& band) {
  Band r = band;
  for (int x = 0; x < 3; ++x) r.ext[x] = x == band.axis ? band.hi - band.lo : aa[x].out;
  r.base = band.lo;
  if (band.col_tiled()) {
    r.ext[2] = band.cols_hi - band.cols_lo;
    r.cols_base = band.cols_lo;
  }
  return r;
}

// Per-partition SBUF bytes of the program for bands of `rows` output rows and b-blocks of at
// most `nt` channels: a_t bands, b_t bands (one per 128-channel sub-tile, with staging), the
// transposed tiles and the [a_w, b_w x taps] gradient staging tile, all double-buffered but the
// last. Sized by the widest block actually used, not the engine's maximum.
uint64_t wg_bytes(const WeightGrad& w, int64_t rows, int64_t cols, uint32_t nt, uint32_t P) {
  const uint64_t es = dtype_size(w.a.dtype);
  const Axes aa = a_axes(w.axes);
  uint64_t bbuf = 0, stage = 0, abuf = 0;
  for (const Band& band : make_bands(w.axes, rows, cols)) {
    bbuf = std::max<uint64_t>(bbuf, band.buffer_elements());
    if (!covers(w.axes, band)) stage = std::max<uint64_t>(stage, data_elements(w.axes, band));
    abuf = std::max<uint64_t>(abuf, a_band(aa, band).buffer_elements());
  }
  const int64_t G = w.groups, ca_g = w.a.sizes[1] / G, cb_g = w.b.sizes[1] / G;
  uint64_t bw = 1;
  for (const WgBlock& blk : wg_blocks(G, ca_g, cb_g, P, nt))
    bw = std::max<uint64_t>(bw, static_cast<uint64_t>(blk.b_w));
  const uint64_t nsub = (bw + P - 1) / P;
  int64_t ktot = 1;
  for (int x = 0; x < 3; ++x) ktot *= w.axes[x].kernel;
  return (2 * (abuf + nsub * (bbuf + stage)) + 2 * P + 2 * std::max<uint64_t>(bw, P)) * es +
         bw * ktot * dtype_size(w.dw.dtype) + 16 * 64;
}

// Band rows and b-block width: the widest block (fewest passes over the input) whose bands
// still hold a few rows; narrower blocks when the gradient staging tile (b_w x taps, e.g.
// 512 channels x 49 taps of a 7x7 kernel) crowds the bands out. When not even one row fits (a
// wide image), one-row bands split into tiles of `cols` output columns. rows 0: nothing fits.
struct WgPlan {
  int64_t rows = 0, cols = 0;
  uint32_t nt = 0;
};

WgPlan wg_plan(const WeightGrad& w, const CoreParams& core) {
  const uint32_t P = core.tensor.rows, NT = core.tensor.moving_free_max;
  const int64_t total = w.axes[band_axis(w.axes)].out;
  const uint64_t cap = core.sbuf.partition_bytes;
  const int64_t want = std::min<int64_t>(total, 8);
  WgPlan best;
  for (uint32_t nt = NT; nt >= 1; nt /= 2) {
    int64_t rows = total;
    while (wg_bytes(w, rows, 0, nt, P) > cap && rows > 1) rows = (rows + 1) / 2;
    if (wg_bytes(w, rows, 0, nt, P) > cap) rows = 0;
    if (rows > best.rows) best = {rows, 0, nt};
    if (rows >= want) break;
  }
  if (best.rows > 0 || band_axis(w.axes) == 2) return best;
  const int64_t width = w.axes[2].out;
  for (uint32_t nt = NT; nt >= 1; nt /= 2) {
    int64_t cols = width;
    while (wg_bytes(w, 1, cols, nt, P) > cap && cols > 1) cols = (cols + 1) / 2;
    if (wg_bytes(w, 1, cols, nt, P) > cap) continue;
    if (cols > best.cols) best = {1, cols, nt};
    if (cols >= std::min<int64_t>(width, P)) break;
  }
  return best;
}

}  // namespace

int64_t weight_grad_band_rows(const WeightGrad& w, const CoreParams& core) {
  return wg_plan(w, core).rows;
}

Program build_weight_grad(const std::string& name, const WeightGrad& w, const CoreParams& core) {
  ProgramBuilder b(name, core);
  if (w.dw.numel() == 0) return std::move(b).build();
  const WgPlan plan = wg_plan(w, core);
  const int64_t rows = plan.rows;
  if (rows == 0) {
    throw std::invalid_argument(
        fmt::format("{}: even one output position of {} (a one-row, one-column band and its input "
                    "window) does not fit SBUF",
                    name, w.a.to_string()));
  }
  const uint32_t P = core.tensor.rows, NT = plan.nt;
  const DType dt = w.a.dtype, odt = w.dw.dtype;
  const uint64_t es = dtype_size(dt), oes = dtype_size(odt);
  const Axes& ax = w.axes;
  const Axes aa = a_axes(ax);
  const int64_t N = w.a.sizes[0], G = w.groups;
  const int64_t ca_g = w.a.sizes[1] / G, cb_g = w.b.sizes[1] / G;
  int64_t ktot = 1;
  for (int x = 0; x < 3; ++x) ktot *= ax[x].kernel;
  const std::vector<Band> bands = make_bands(ax, rows, plan.cols);
  const std::vector<WgBlock> blocks = wg_blocks(G, ca_g, cb_g, P, NT);
  uint32_t BW = 1;  // the widest b-block: sizes the b_t tiles and the gradient staging tile
  for (const WgBlock& blk : blocks) BW = std::max(BW, static_cast<uint32_t>(blk.b_w));
  const uint32_t nsub_max = (BW + P - 1) / P;

  uint64_t bbuf = 0, stage = 0, abuf = 0;
  for (const Band& band : bands) {
    bbuf = std::max<uint64_t>(bbuf, band.buffer_elements() * es);
    if (!covers(ax, band)) stage = std::max<uint64_t>(stage, data_elements(ax, band) * es);
    abuf = std::max<uint64_t>(abuf, a_band(aa, band).buffer_elements() * es);
  }
  const uint64_t a_off = b.alloc_sbuf(2 * abuf);
  const uint64_t b_off = b.alloc_sbuf(2 * nsub_max * bbuf);
  const uint64_t st_off = b.alloc_sbuf(std::max<uint64_t>(1, 2 * nsub_max * stage));
  const uint64_t at_off = b.alloc_sbuf(2 * uint64_t{P} * es);
  const uint32_t BTW = std::max(BW, P);  // b_t tile width: a block, or R replicated taps
  const uint64_t bt_off = b.alloc_sbuf(2 * uint64_t{BTW} * es);
  const uint64_t wst_off = b.alloc_sbuf(uint64_t{BW} * ktot * oes);
  uint64_t tr_bank[2], acc_bank[kAccBanksWg];
  for (auto& x : tr_bank) x = b.alloc_psum_bank();
  for (auto& x : acc_bank) x = b.alloc_psum_bank();
  const uint64_t bank_bytes = core.psum.bank_bytes();
  auto tr_slot = [&](int s) { return tr_bank[s / 4] + (s % 4) * (bank_bytes / 4); };

  const StreamId q_a = dma_queue(0), q_b0 = dma_queue(1), q_b1 = dma_queue(2), q_out = dma_queue(3),
                 q_rep = dma_queue(4);
  bool zero_each = false;
  if (bands.size() > 1) {
    for (const Band& band : bands) zero_each |= !covers(ax, band);
  }
  // evac_v/evac_s: the last PSUM evacuations of a pass on each engine (the accumulators are free
  // once both are done); wst_free: the staging tile's last store.
  Token a_free[2], b_free[2], at_free[2], bt_free[2], tr_free[kTrSlots], evac_v, evac_s, wst_free;
  std::vector<Token> stage_free(2 * nsub_max);
  std::vector<int64_t> zeroed(2 * nsub_max, 0);
  uint64_t slot_count = 0, tr_count = 0, copy_count = 0, at_count = 0, bt_count = 0;

  // PSUM -> SBUF copies alternate between VectorE and ScalarE.
  auto evacuate = [&](const AccessPattern& dst, const AccessPattern& src,
                      std::initializer_list<Token> waits) {
    const StreamId e = copy_count++ % 2 ? kScalar : kVector;
    for (const Token& t : waits) b.wait(e, t);
    if (e == kScalar) {
      b.emit(e, isa::activation(dst, src, ActFunc::kCopy));
    } else {
      b.emit(e, isa::tensor_copy(dst, src));
    }
    return b.mark(e);
  };

  for (const WgBlock& blk : blocks) {
    const uint32_t a_w = static_cast<uint32_t>(blk.a_w), b_w = static_cast<uint32_t>(blk.b_w);
    const uint32_t nsub = (b_w + P - 1) / P;
    const int64_t R = wg_replicas(ax, b_w, P);
    const std::vector<WgTaps> groups = wg_tap_groups(ax, R);
    const int64_t ngroups = static_cast<int64_t>(groups.size());
    // Accumulators: R * b_w columns per tap group, whole groups per PSUM bank.
    const int64_t gw_max = R * b_w;
    const int64_t per_bank = std::max<int64_t>(1, 512 / gw_max);
    const int64_t groups_per_pass = per_bank * kAccBanksWg;
    auto acc_ap = [&](int64_t g_in_pass, int64_t count) {
      const int64_t bank = g_in_pass / per_bank, within = g_in_pass % per_bank;
      return isa::psum_tile(DType::kFp32, a_w, acc_bank[bank] + within * gw_max * 4,
                            static_cast<uint32_t>(count * b_w));
    };
    b.wait(kVector, wst_free);
    b.wait(kScalar, wst_free);
    for (int64_t t0 = 0; t0 < ngroups; t0 += groups_per_pass) {
      const int64_t t1 = std::min(ngroups, t0 + groups_per_pass);
      std::vector<bool> started(t1 - t0, false);
      b.wait(kTensor, evac_v);
      b.wait(kTensor, evac_s);
      for (int64_t n = 0; n < N; ++n) {
        for (const Band& band : bands) {
          const int slot = static_cast<int>(slot_count++ % 2);
          const Band ab = a_band(aa, band);
          BandLoad wa;
          wa.buffer = a_off + slot * abuf;
          wa.dma = q_a;
          const Token a_loaded =
              load_band(b, w.a, aa, ab, n, blk.a0, a_w, wa, a_free[slot], Token{}, nullptr);
          std::vector<Token> b_loaded(nsub);
          for (uint32_t s = 0; s < nsub; ++s) {
            const uint32_t sw = std::min<uint32_t>(P, b_w - s * P);
            BandLoad wb;
            wb.buffer = b_off + (slot * nsub_max + s) * bbuf;
            wb.stage = st_off + (slot * nsub_max + s) * stage;
            wb.dma = s % 2 ? q_b1 : q_b0;
            wb.engine = kGpSimd;
            int64_t& z = zeroed[slot * nsub_max + s];
            wb.zero = zero_each || z < sw;
            Token* sf = &stage_free[slot * nsub_max + s];
            b_loaded[s] =
                load_band(b, w.b, ax, band, n, blk.b0 + s * P, sw, wb, b_free[slot], *sf, sf);
            z = std::max<int64_t>(z, sw);
            for (int64_t j = 1; j < R; ++j) {
              // Copy j on partitions [j * sw, ...): the band shifted by j taps along the
              // innermost axis (its last positions, never read by a valid tap, left as they are).
              const int64_t shift = j * ax[2].dilation;
              const uint32_t L = static_cast<uint32_t>(band.buffer_elements() - shift);
              b.wait(q_rep, b_loaded[s]);
              b.emit(q_rep, isa::dma_copy(
                                isa::sbuf_tile(dt, sw, wb.buffer, L, static_cast<uint32_t>(j * sw)),
                                isa::sbuf_tile(dt, sw, wb.buffer + shift * es, L)));
            }
            if (R > 1) b_loaded[s] = b.mark(q_rep);
          }
          for (const Rect& r : make_blocks(ax, band, P)) {
            const uint32_t npos = static_cast<uint32_t>(r.size());
            // a_t block -> [npos, a_w] stationary.
            int ts = static_cast<int>(tr_count++ % kTrSlots);
            b.wait(kTensor, a_loaded);
            b.wait(kTensor, tr_free[ts]);
            const AccessPattern tr_a = isa::psum_tile(dt, npos, tr_slot(ts), a_w);
            b.emit(kTensor,
                   isa::transpose(tr_a, window_ap(dt, a_w, wa.buffer, aa, ab, r, {0, 0, 0})));
            const Token a_tr = b.mark(kTensor);
            const int as = static_cast<int>(at_count++ % 2);
            const AccessPattern at = isa::sbuf_tile(dt, npos, at_off + as * P * es, a_w);
            tr_free[ts] = evacuate(at, tr_a, {a_tr, at_free[as]});
            const Token at_ready = tr_free[ts];
            for (int64_t k = t0; k < t1; ++k) {
              const WgTaps& tg = groups[k];
              // Columns of the moving tile: b_w channels of one tap, or (R > 1, one sub-tile)
              // tap j's channels at [j * b_w, ...).
              const uint32_t cols = static_cast<uint32_t>(tg.count * b_w);
              const int bs = static_cast<int>(bt_count++ % 2);
              Token bt_ready;
              for (uint32_t s = 0; s < nsub; ++s) {
                const uint32_t sw = std::min<uint32_t>(P, b_w - s * P);
                const uint32_t K = static_cast<uint32_t>(tg.count) * sw;
                ts = static_cast<int>(tr_count++ % kTrSlots);
                b.wait(kTensor, b_loaded[s]);
                b.wait(kTensor, tr_free[ts]);
                const AccessPattern tr_b = isa::psum_tile(dt, npos, tr_slot(ts), K);
                const uint64_t src = b_off + (slot * nsub_max + s) * bbuf;
                b.emit(kTensor, isa::transpose(tr_b, window_ap(dt, K, src, ax, band, r, tg.tap)));
                const Token b_tr = b.mark(kTensor);
                const AccessPattern bt =
                    isa::sbuf_tile(dt, npos, bt_off + (bs * BTW + s * P) * es, K);
                tr_free[ts] = evacuate(bt, tr_b, {b_tr, bt_free[bs]});
                bt_ready = tr_free[ts];
              }
              b.wait(kTensor, at_ready);
              b.wait(kTensor, bt_ready);
              const AccessPattern mov = isa::sbuf_tile(dt, npos, bt_off + bs * BTW * es, cols);
              b.emit(kTensor, isa::matmul(acc_ap(k - t0, tg.count), at, mov, started[k - t0]));
              started[k - t0] = true;
              bt_free[bs] = b.mark(kTensor);
            }
            at_free[as] = b.mark(kTensor);
          }
          a_free[slot] = b.mark(kTensor);
          b_free[slot] = a_free[slot];
        }
      }
      // Evacuate this pass's taps into the staging tile [a_w, b_w x ktot] (dw's own layout):
      // accumulator column j * b_w + c is tap first + j of channel c.
      const Token mm_done = b.mark(kTensor);
      for (int64_t k = t0; k < t1; ++k) {
        const WgTaps& tg = groups[k];
        const AccessPattern acc = acc_ap(k - t0, tg.count);
        const AccessPattern dst = sbuf_ap(odt, 0, a_w, wst_off + tg.first * oes,
                                          {{1, static_cast<uint32_t>(tg.count)}, {ktot, b_w}});
        if (!started[k - t0]) {  // nothing to sum (no images or positions)
          b.wait(kVector, mm_done);
          b.emit(kVector, isa::memset(dst, 0.0f));
          continue;
        }
        evacuate(dst, acc, {mm_done});
      }
      evac_v = b.mark(kVector);
      evac_s = b.mark(kScalar);
      b.wait(q_out, evac_v);
      b.wait(q_out, evac_s);
    }
    // Store the gradient rows (the diagonal blocks when groups are packed).
    const int64_t ra = blk.ng > 1 ? ca_g : a_w, cb = blk.ng > 1 ? cb_g : b_w;
    for (int64_t gi = 0; gi < blk.ng; ++gi) {
      const int64_t g = blk.g0 + gi;
      const int64_t row0 = blk.ng > 1 ? g * ca_g : blk.a0;
      const int64_t col0 = blk.ng > 1 ? 0 : blk.b0 - g * cb_g;
      AccessPattern dst = hbm_ap(w.dw, row0 * w.dw.strides[0] + col0 * w.dw.strides[1],
                                 static_cast<uint32_t>(ra), w.dw.strides[0], {});
      dst = with_dims(dst, {{w.dw.strides[1], static_cast<uint32_t>(cb)},
                            {w.dw.strides[2], static_cast<uint32_t>(w.dw.sizes[2])},
                            {w.dw.strides[3], static_cast<uint32_t>(w.dw.sizes[3])},
                            {w.dw.strides[4], static_cast<uint32_t>(w.dw.sizes[4])}});
      const AccessPattern src = isa::sbuf_tile(
          odt, static_cast<uint32_t>(ra), wst_off + static_cast<uint64_t>(gi * cb_g * ktot) * oes,
          static_cast<uint32_t>(cb * ktot), static_cast<uint32_t>(gi * ra));
      b.emit(q_out, isa::dma_copy(dst, src));
    }
    wst_free = b.mark(q_out);
  }
  return std::move(b).build();
}

Program build_bias_grad(const std::string& name, const TensorDesc& g, const TensorDesc& gb,
                        const CoreParams& core) {
  ProgramBuilder b(name, core);
  const int64_t N = g.sizes[0], C = g.sizes[1];
  if (C == 0) return std::move(b).build();
  const uint32_t P = core.sbuf.partitions;
  constexpr int64_t kChunk = 8192;
  const DType dt = g.dtype;
  const uint64_t es = dtype_size(dt);
  const uint64_t tile_off = b.alloc_sbuf(2 * kChunk * es);
  const uint64_t acc_off = b.alloc_sbuf(8);
  Axes ax;
  for (int x = 0; x < 3; ++x) ax[x] = Axis{g.sizes[2 + x], g.sizes[2 + x], 1, 1, 1, 1, 0};
  const Band whole = make_bands(ax, ax[band_axis(ax)].out).front();
  const std::vector<Rect> rects = make_blocks(ax, whole, kChunk);
  const StreamId q[2] = {dma_queue(0), dma_queue(1)};
  Token tile_free[2], acc_stored;
  uint64_t count = 0;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const AccessPattern acc = isa::sbuf_tile(DType::kFp32, cw, acc_off, 1);
    const AccessPattern part = isa::sbuf_tile(DType::kFp32, cw, acc_off + 4, 1);
    b.wait(kVector, acc_stored);
    bool first = true;
    for (int64_t n = 0; n < N; ++n) {
      for (const Rect& r : rects) {
        if (r.size() == 0) continue;
        const int s = static_cast<int>(count++ % 2);
        const AccessPattern t =
            isa::sbuf_tile(dt, cw, tile_off + s * kChunk * es, static_cast<uint32_t>(r.size()));
        b.wait(q[s], tile_free[s]);
        b.emit(q[s], isa::dma_copy(t, feature_ap(g, n, c0, cw, r.start, r.count)));
        b.wait(kVector, b.mark(q[s]));
        b.emit(kVector, isa::tensor_reduce(first ? acc : part, t, ReduceOp::kAdd));
        if (!first) b.emit(kVector, isa::tensor_tensor(acc, acc, part, AluOp::kAdd));
        first = false;
        tile_free[s] = b.mark(kVector);
      }
    }
    if (first) b.emit(kVector, isa::memset(acc, 0.0f));
    const Token done = b.mark(kVector);
    b.wait(q[0], done);
    b.emit(q[0], isa::dma_copy(hbm_ap(gb, c0 * gb.strides[0], cw, gb.strides[0], {}), acc));
    acc_stored = b.mark(q[0]);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels::conv
