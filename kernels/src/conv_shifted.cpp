#include "conv_shifted.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels::conv {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

constexpr int kAccBanks = 4;
constexpr int kTransposeBanks = 2;

// Output channels [co0, co0 + co_w) computed together, contracting over the channel tiles `ck`
// (global channel index, width). ng > 1: groups g0 .. g0 + ng - 1 packed block-diagonally.
struct Block {
  int64_t g0 = 0, ng = 1, co0 = 0, co_w = 0;
  std::vector<std::pair<int64_t, int64_t>> ck;
};

std::vector<Block> channel_blocks(int64_t G, int64_t ck_g, int64_t co_g, uint32_t P, uint32_t MT) {
  std::vector<Block> blocks;
  const int64_t pack =
      G > 1 ? std::max<int64_t>(
                  1, std::min({G, P / std::max<int64_t>(ck_g, 1), MT / std::max<int64_t>(co_g, 1)}))
            : 1;
  if (pack > 1) {
    for (int64_t g0 = 0; g0 < G; g0 += pack) {
      const int64_t ng = std::min(pack, G - g0);
      Block b{g0, ng, g0 * co_g, ng * co_g, {}};
      if (ck_g > 0) b.ck.push_back({g0 * ck_g, ng * ck_g});
      blocks.push_back(b);
    }
    return blocks;
  }
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t c = 0; c < co_g; c += MT) {
      Block b{g, 1, g * co_g + c, std::min<int64_t>(MT, co_g - c), {}};
      for (int64_t k = 0; k < ck_g; k += P)
        b.ck.push_back({g * ck_g + k, std::min<int64_t>(P, ck_g - k)});
      blocks.push_back(b);
    }
  }
  return blocks;
}

// Taps stacked on the partitions: R copies of the band, copy j shifted by j taps along the
// innermost axis, when a block contracts over one tile of at most P / 2 channels.
int64_t replicas(const Block& b, const Axes& a, uint32_t P) {
  if (b.ck.size() != 1 || b.ck[0].second == 0) return 1;
  return std::max<int64_t>(1, std::min<int64_t>(a[2].kernel, P / b.ck[0].second));
}

// Taps (k0, k1, k2 .. k2 + count - 1) contracted by one matmul.
struct TapGroup {
  std::array<int64_t, 3> tap{};
  int64_t count = 1;
};

std::vector<TapGroup> tap_groups(const Axes& a, int64_t R) {
  std::vector<TapGroup> g;
  for (int64_t k0 = 0; k0 < a[0].kernel; ++k0)
    for (int64_t k1 = 0; k1 < a[1].kernel; ++k1)
      for (int64_t k2 = 0; k2 < a[2].kernel; k2 += R)
        g.push_back({{k0, k1, k2}, std::min(R, a[2].kernel - k2)});
  return g;
}

struct Plan {
  std::vector<Block> blocks;
  int64_t ktot = 1;
  int64_t ck_g = 0, co_g = 0;
  uint64_t e_elems = 0;     // natural weight tile per channel tile (elements per partition)
  uint64_t stat_elems = 0;  // stationary slots (transpose route)
  size_t max_ck_tiles = 0;
  uint64_t weight_bytes = 0;
};

Plan make_plan(const ShiftedConv& c, const CoreParams& core) {
  Plan p;
  const uint32_t P = core.tensor.rows, MT = core.tensor.columns;
  const int64_t Ck = c.in.sizes[1], Co = c.out.sizes[1];
  p.ck_g = Ck / c.groups;
  p.co_g = Co / c.groups;
  for (int x = 0; x < 3; ++x) p.ktot *= c.axes[x].kernel;
  p.blocks = channel_blocks(c.groups, p.ck_g, p.co_g, P, MT);
  const uint64_t es = dtype_size(c.in.dtype);
  for (const Block& b : p.blocks) {
    const int64_t R = replicas(b, c.axes, P);
    const uint64_t ngroups = tap_groups(c.axes, R).size();
    p.max_ck_tiles = std::max(p.max_ck_tiles, b.ck.size());
    for (const auto& [ck0, ck_w] : b.ck) {
      (void)ck0;
      if (c.contraction_first) {
        p.e_elems = std::max<uint64_t>(p.e_elems, b.co_w * p.ktot + 2 * (R - 1));
      } else {
        p.e_elems = std::max<uint64_t>(p.e_elems, ck_w * p.ktot);
        p.stat_elems = std::max<uint64_t>(p.stat_elems, b.ck.size() * ngroups * b.co_w);
      }
    }
  }
  p.weight_bytes = (p.max_ck_tiles * p.e_elems + p.stat_elems) * es + 4 + 64 * 4;
  return p;
}

uint64_t band_bytes(const ShiftedConv& c, const Plan& p, int64_t rows, int64_t cols) {
  const uint64_t es = dtype_size(c.in.dtype), oes = dtype_size(c.out.dtype);
  uint64_t buf = 0, stage = 0, outs = 0;
  for (const Band& band : make_bands(c.axes, rows, cols)) {
    buf = std::max<uint64_t>(buf, band.buffer_elements());
    if (!covers(c.axes, band)) stage = std::max<uint64_t>(stage, data_elements(c.axes, band));
    outs = std::max<uint64_t>(outs, band.outputs(c.axes));
  }
  return 2 * p.max_ck_tiles * (buf + stage) * es + 2 * outs * oes + 8 * 64;
}

// Band rows, halving until a band fits SBUF; when not even one row does (a wide image), one-row
// bands split into column tiles (cols > 0). rows 0: nothing fits.
struct Tiling {
  int64_t rows = 0, cols = 0;
};

Tiling choose_tiling(const ShiftedConv& c, const Plan& p, const CoreParams& core) {
  const uint64_t cap = core.sbuf.partition_bytes;
  if (p.weight_bytes >= cap) return {};
  const uint64_t budget = cap - p.weight_bytes;
  const int axis = band_axis(c.axes);
  int64_t rows = c.axes[axis].out;
  while (band_bytes(c, p, rows, 0) > budget && rows > 1) rows = (rows + 1) / 2;
  if (band_bytes(c, p, rows, 0) <= budget) return {rows, 0};
  if (axis == 2) return {};
  int64_t cols = c.axes[2].out;
  while (band_bytes(c, p, 1, cols) > budget && cols > 1) cols = (cols + 1) / 2;
  return band_bytes(c, p, 1, cols) <= budget ? Tiling{1, cols} : Tiling{};
}

// HBM pattern of weight rows [r0, r0 + rows) x columns [c0, c0 + cols) x every tap.
AccessPattern weight_ap(const TensorDesc& w, int64_t r0, uint32_t rows, int64_t c0, uint32_t cols) {
  AccessPattern base = hbm_ap(w, r0 * w.strides[0] + c0 * w.strides[1], rows, w.strides[0], {});
  return with_dims(base, {{w.strides[1], cols},
                          {w.strides[2], static_cast<uint32_t>(w.sizes[2])},
                          {w.strides[3], static_cast<uint32_t>(w.sizes[3])},
                          {w.strides[4], static_cast<uint32_t>(w.sizes[4])}});
}

}  // namespace

int64_t shifted_conv_band_rows(const ShiftedConv& c, const CoreParams& core) {
  return choose_tiling(c, make_plan(c, core), core).rows;
}

Program build_shifted_conv(const std::string& name, const ShiftedConv& c, const CoreParams& core) {
  ProgramBuilder b(name, core);
  if (c.out.numel() == 0) return std::move(b).build();
  const Plan plan = make_plan(c, core);
  const Tiling tiling = choose_tiling(c, plan, core);
  if (tiling.rows == 0) {
    throw std::invalid_argument(
        fmt::format("{}: even one output position of {} (a one-row, one-column band and its input "
                    "window) does not fit SBUF",
                    name, c.out.to_string()));
  }
  const uint32_t P = core.tensor.rows, NT = core.tensor.moving_free_max;
  const DType dt = c.in.dtype, odt = c.out.dtype;
  const uint64_t es = dtype_size(dt), oes = dtype_size(odt);
  const Axes& ax = c.axes;
  const int64_t N = c.in.sizes[0], K2 = ax[2].kernel, ktot = plan.ktot;
  const std::vector<Band> bands = make_bands(ax, tiling.rows, tiling.cols);

  // SBUF: weights, bias column, then per slot (2) and channel tile: band buffer and staging,
  // then two output staging tiles.
  const uint64_t e_bytes = plan.e_elems * es;
  const uint64_t e_off = b.alloc_sbuf(std::max<uint64_t>(1, plan.max_ck_tiles * e_bytes));
  const uint64_t stat_off = b.alloc_sbuf(std::max<uint64_t>(1, plan.stat_elems * es));
  const uint64_t bias_off = b.alloc_sbuf(4);
  uint64_t buf_bytes = 0, stage_bytes = 0, out_bytes = 0;
  for (const Band& band : bands) {
    buf_bytes = std::max<uint64_t>(buf_bytes, band.buffer_elements() * es);
    if (!covers(ax, band))
      stage_bytes = std::max<uint64_t>(stage_bytes, data_elements(ax, band) * es);
    out_bytes = std::max<uint64_t>(out_bytes, band.outputs(ax) * oes);
  }
  const size_t nck = std::max<size_t>(1, plan.max_ck_tiles);
  const uint64_t buf_off = b.alloc_sbuf(2 * nck * buf_bytes);
  const uint64_t stage_off = b.alloc_sbuf(std::max<uint64_t>(1, 2 * nck * stage_bytes));
  const uint64_t out_off = b.alloc_sbuf(2 * out_bytes);
  auto buf_at = [&](int slot, size_t t) { return buf_off + (slot * nck + t) * buf_bytes; };
  auto stage_at = [&](int slot, size_t t) { return stage_off + (slot * nck + t) * stage_bytes; };
  uint64_t acc_bank[kAccBanks], tr_bank[kTransposeBanks];
  for (auto& x : acc_bank) x = b.alloc_psum_bank();
  for (auto& x : tr_bank) x = b.alloc_psum_bank();

  const StreamId q_in0 = dma_queue(0), q_in1 = dma_queue(1), q_w = dma_queue(2),
                 q_out = dma_queue(3), q_rep = dma_queue(4);
  // A band whose padding moves between bands (several bands with edges, spread inputs) is
  // zeroed on every load; otherwise once, before the first load of each slot.
  bool zero_each = false;
  if (bands.size() > 1) {
    for (const Band& band : bands) zero_each |= !covers(ax, band);
  }
  Token w_free, bank_free[kAccBanks], tr_free[kTransposeBanks], out_free[2], buf_free[2];
  std::vector<Token> stage_free(2 * nck);
  std::vector<int64_t> zeroed(2 * nck, 0);  // partitions of each buffer zeroed so far
  uint64_t bank_count = 0, tr_count = 0, slot_count = 0;
  const int64_t sigma = c.flip ? -1 : 1;
  // Flat tap index (row-major over the kernel dims) of buffer tap (k0, k1, k2).
  auto tap_index = [&](const std::array<int64_t, 3>& t) {
    std::array<int64_t, 3> k = t;
    if (c.flip) {
      for (int x = 0; x < 3; ++x) k[x] = ax[x].kernel - 1 - t[x];
    }
    return (k[0] * ax[1].kernel + k[1]) * K2 + k[2];
  };

  for (const Block& blk : plan.blocks) {
    const int64_t R = replicas(blk, ax, P);
    const std::vector<TapGroup> groups = tap_groups(ax, R);
    const uint32_t co_w = static_cast<uint32_t>(blk.co_w);
    const int64_t margin = c.contraction_first ? R - 1 : 0;
    // ---- weights: natural tiles, then stationary operands (one per channel tile and group).
    std::vector<Token> w_ready(blk.ck.size());
    for (size_t t = 0; t < blk.ck.size(); ++t) {
      const auto [ck0, ck_w] = blk.ck[t];
      const uint64_t e_t = e_off + t * e_bytes;
      const uint32_t rows_e = static_cast<uint32_t>(c.contraction_first ? ck_w : blk.co_w);
      const uint32_t cols_e = static_cast<uint32_t>(c.contraction_first ? blk.co_w : ck_w);
      b.wait(q_w, w_free);
      if (blk.ng > 1) {
        b.wait(kVector, w_free);
        b.emit(kVector,
               isa::memset(isa::sbuf_tile(dt, rows_e, e_t, static_cast<uint32_t>(plan.e_elems)),
                           0.0f));
        b.wait(q_w, b.mark(kVector));
      }
      for (int64_t gi = 0; gi < blk.ng; ++gi) {
        // Rows and columns of this group's part of the tile, in the weight's own indexing.
        const int64_t g = blk.g0 + gi;
        const int64_t r_per = blk.ng > 1 ? rows_e / blk.ng : rows_e;
        const int64_t c_per = blk.ng > 1 ? cols_e / blk.ng : cols_e;
        const int64_t row0 = c.contraction_first ? (blk.ng > 1 ? g * plan.ck_g : ck0)
                                                 : (blk.ng > 1 ? g * plan.co_g : blk.co0);
        const int64_t col0 = c.contraction_first ? (blk.ng > 1 ? 0 : blk.co0 - blk.g0 * plan.co_g)
                                                 : (blk.ng > 1 ? 0 : ck0 - blk.g0 * plan.ck_g);
        const AccessPattern src = weight_ap(c.weight, row0, static_cast<uint32_t>(r_per), col0,
                                            static_cast<uint32_t>(c_per));
        const AccessPattern dst =
            isa::sbuf_tile(dt, static_cast<uint32_t>(r_per),
                           e_t + static_cast<uint64_t>(margin + gi * c_per * ktot) * es,
                           static_cast<uint32_t>(c_per * ktot), static_cast<uint32_t>(gi * r_per));
        b.emit(q_w, isa::dma_copy(dst, src));
      }
      if (c.contraction_first) {
        // Copy j of the tile on partitions [j * ck_w, ...), shifted by j taps.
        const uint32_t L = static_cast<uint32_t>(blk.co_w * ktot);
        for (int64_t j = 1; j < R; ++j) {
          b.emit(q_w, isa::dma_copy(
                          isa::sbuf_tile(dt, static_cast<uint32_t>(ck_w),
                                         e_t + static_cast<uint64_t>(margin - j * sigma) * es, L,
                                         static_cast<uint32_t>(j * ck_w)),
                          isa::sbuf_tile(dt, static_cast<uint32_t>(ck_w), e_t + margin * es, L)));
        }
        w_ready[t] = b.mark(q_w);
        continue;
      }
      const Token loaded = b.mark(q_w);
      for (size_t gidx = 0; gidx < groups.size(); ++gidx) {
        const TapGroup& tg = groups[gidx];
        const uint32_t F = static_cast<uint32_t>(tg.count * ck_w);
        const int tb = static_cast<int>(tr_count++ % kTransposeBanks);
        const AccessPattern src = sbuf_ap(
            dt, 0, co_w, e_t + static_cast<uint64_t>(tap_index(tg.tap)) * es,
            {{sigma, static_cast<uint32_t>(tg.count)}, {ktot, static_cast<uint32_t>(ck_w)}});
        const AccessPattern ps = isa::psum_tile(dt, F, tr_bank[tb], co_w);
        b.wait(kTensor, loaded);
        b.wait(kTensor, tr_free[tb]);
        b.emit(kTensor, isa::transpose(ps, src));
        const Token tr = b.mark(kTensor);
        b.wait(kVector, tr);
        b.wait(kVector, w_free);
        const uint64_t slot = stat_off + (t * groups.size() + gidx) * blk.co_w * es;
        b.emit(kVector, isa::tensor_copy(isa::sbuf_tile(dt, F, slot, co_w), ps));
        tr_free[tb] = b.mark(kVector);
      }
      w_ready[t] = tr_free[(tr_count - 1) % kTransposeBanks];
    }
    AccessPattern bias_col;
    Token bias_ready;
    if (c.bias) {
      bias_col = isa::sbuf_tile(DType::kFp32, co_w, bias_off, 1);
      b.wait(q_w, w_free);
      b.emit(q_w, isa::dma_copy(bias_col, hbm_ap(*c.bias, blk.co0 * c.bias->strides[0], co_w,
                                                 c.bias->strides[0], {})));
      bias_ready = b.mark(q_w);
    }
    auto stationary = [&](size_t t, size_t gidx) {
      const auto [ck0, ck_w] = blk.ck[t];
      const TapGroup& tg = groups[gidx];
      const uint32_t K = static_cast<uint32_t>(tg.count * ck_w);
      if (c.contraction_first) {
        return sbuf_ap(dt, 0, K,
                       e_off + t * e_bytes + static_cast<uint64_t>(margin + tap_index(tg.tap)) * es,
                       {{ktot, co_w}});
      }
      return isa::sbuf_tile(dt, K, stat_off + (t * groups.size() + gidx) * blk.co_w * es, co_w);
    };

    // ---- images and bands.
    for (int64_t n = 0; n < N; ++n) {
      for (const Band& band : bands) {
        const int slot = static_cast<int>(slot_count++ % 2);
        std::vector<Token> loaded(blk.ck.size());
        for (size_t t = 0; t < blk.ck.size(); ++t) {
          const auto [ck0, ck_w] = blk.ck[t];
          BandLoad where;
          where.buffer = buf_at(slot, t);
          where.stage = stage_at(slot, t);
          where.dma = t % 2 ? q_in1 : q_in0;
          where.engine = kGpSimd;
          int64_t& z = zeroed[slot * nck + t];
          where.zero = zero_each || z < ck_w;
          z = std::max(z, ck_w);
          Token* sf = &stage_free[slot * nck + t];
          loaded[t] = load_band(b, c.in, ax, band, n, ck0, static_cast<uint32_t>(ck_w), where,
                                buf_free[slot], *sf, sf);
          for (int64_t j = 1; j < R; ++j) {
            // Copy j: the buffer shifted by j taps along the innermost axis.
            const int64_t shift = j * ax[2].dilation;
            const uint32_t L = static_cast<uint32_t>(band.buffer_elements() - shift);
            b.wait(q_rep, loaded[t]);
            b.emit(q_rep, isa::dma_copy(
                              isa::sbuf_tile(dt, static_cast<uint32_t>(ck_w), where.buffer, L,
                                             static_cast<uint32_t>(j * ck_w)),
                              isa::sbuf_tile(dt, static_cast<uint32_t>(ck_w),
                                             where.buffer + static_cast<uint64_t>(shift) * es, L)));
          }
          if (R > 1) loaded[t] = b.mark(q_rep);
        }

        for (const Rect& r : make_blocks(ax, band, NT)) {
          const int bank = static_cast<int>(bank_count++ % kAccBanks);
          const uint32_t npos = static_cast<uint32_t>(r.size());
          const AccessPattern acc = isa::psum_tile(DType::kFp32, co_w, acc_bank[bank], npos);
          b.wait(kTensor, bank_free[bank]);
          bool first = true;
          for (size_t t = 0; t < blk.ck.size(); ++t) {
            b.wait(kTensor, loaded[t]);
            b.wait(kTensor, w_ready[t]);
            const uint32_t ck_w = static_cast<uint32_t>(blk.ck[t].second);
            for (size_t gidx = 0; gidx < groups.size(); ++gidx) {
              const uint32_t K = static_cast<uint32_t>(groups[gidx].count) * ck_w;
              const AccessPattern mov =
                  window_ap(dt, K, buf_at(slot, t), ax, band, r, groups[gidx].tap);
              b.emit(kTensor, isa::matmul(acc, stationary(t, gidx), mov, !first));
              first = false;
            }
          }
          if (first) {  // no contraction channels: the sum is empty
            b.wait(kVector, bank_free[bank]);
            b.emit(kVector, isa::memset(acc, 0.0f));
          }
          const Token mm = first ? b.mark(kVector) : b.mark(kTensor);
          b.wait(kScalar, mm);
          b.wait(kScalar, out_free[slot]);
          b.wait(kScalar, bias_ready);
          const AccessPattern dst =
              isa::sbuf_tile(odt, co_w, out_off + slot * out_bytes + r.offset * oes, npos);
          b.emit(kScalar, isa::activation(dst, acc, ActFunc::kCopy, isa::imm(1.0f),
                                          c.bias ? isa::per_partition(bias_col) : isa::imm(0.0f)));
          bank_free[bank] = b.mark(kScalar);
        }
        buf_free[slot] = b.mark(kTensor);
        const Token evacuated = bank_free[(bank_count - 1) % kAccBanks];
        const std::array<int64_t, 3> start = band.origin();
        b.wait(q_out, evacuated);
        const uint32_t nout = static_cast<uint32_t>(band.outputs(ax));
        b.emit(q_out, isa::dma_copy(feature_ap(c.out, n, blk.co0, co_w, start, band.out_counts(ax)),
                                    isa::sbuf_tile(odt, co_w, out_off + slot * out_bytes, nout)));
        out_free[slot] = b.mark(q_out);
      }
    }
    w_free = b.mark(kTensor);
    // The bias column and the natural tiles are rewritten by the next block's DMAs: wait for
    // this block's last evacuation too.
    const Token last_evac = bank_free[(bank_count - 1) % kAccBanks];
    b.wait(q_w, last_evac);
    b.wait(kVector, last_evac);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels::conv
