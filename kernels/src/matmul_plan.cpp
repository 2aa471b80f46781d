#include "matmul_plan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::kernels {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Chunk slots of at most this many bytes per partition: a few KiB per descriptor row keeps the
// per-packet DMA overhead small (DMA-BW: >= 2 KiB per partition approaches peak).
constexpr uint64_t kChunkBytes = 2048;
constexpr uint32_t kMinChunks = 4;
// Streamed chunks in flight when nothing is reused: also when a group has fewer chunks (short K),
// so the next group's chunks load while this one computes.
constexpr uint32_t kStreamedRing = 4;
constexpr uint32_t kMaxStageSlots = 8;  // natural row stripes in flight per natural operand
constexpr double kLookaheadNs = 3000;
constexpr uint64_t kSlack = 64 * 24;  // alignment of the allocations

struct Choice {
  uint32_t rb = 0, resident_slots = 0, streamed_slots = 0;
  double estimate = 0;
  double traffic_s = 0;  // HBM traffic / bandwidth: breaks ties (less DMA pressure)
  bool better_than(const Choice& o) const {
    if (estimate < o.estimate * 0.99) return true;
    if (o.estimate < estimate * 0.99) return false;
    return traffic_s <= o.traffic_s;
  }
};

}  // namespace

namespace {

// The plan for a given PSUM group size, output slots and chunk size cap; estimate_s is
// infinite when it does not fit in SBUF.
MatmulPlan plan_with(const MatmulShape& s, const device_model::CoreParams& core,
                     uint32_t group_banks, uint32_t out_slots, uint64_t chunk_cap,
                     uint32_t max_stage) {
  MatmulPlan p;
  const uint32_t P = core.tensor.rows;
  p.kt = static_cast<uint32_t>(ceil_div(s.k, P));
  const bool natural = s.a.natural || s.b.natural;
  p.tr_banks = natural || s.transposed_out ? 2 : 0;
  p.group_banks = group_banks;
  p.out_slots = out_slots;
  const int64_t mtiles = ceil_div(s.a.extent, s.a.tile), ntiles = ceil_div(s.b.extent, s.b.tile);
  p.gm = static_cast<uint32_t>(std::min<int64_t>(p.group_banks, mtiles));
  p.gn =
      static_cast<uint32_t>(std::max<int64_t>(1, std::min<int64_t>(p.group_banks / p.gm, ntiles)));
  // Narrow output tiles (few columns) share banks; the banks left over take transposes.
  p.acc_tile_bytes = std::min<int64_t>(s.b.tile, s.b.extent) * 4;
  p.tiles_per_bank =
      static_cast<uint32_t>(std::max<uint64_t>(1, core.psum.bank_bytes() / p.acc_tile_bytes));
  p.acc_banks = static_cast<uint32_t>(ceil_div(p.gm * p.gn, p.tiles_per_bank));
  if (p.tr_banks > 0) p.tr_banks = core.psum.banks - 2 * p.acc_banks;
  p.gw_a = std::min<int64_t>(s.a.extent, int64_t{p.gm} * s.a.tile);
  p.gw_b = std::min<int64_t>(s.b.extent, int64_t{p.gn} * s.b.tile);
  const uint64_t row_a = p.gw_a * s.a.elem_bytes, row_b = p.gw_b * s.b.elem_bytes;
  // A kernel of few groups takes at least kMinChunks chunks along K, so its first matmuls wait
  // for a small first load; with many groups the next group's loads hide behind this one.
  const int64_t groups =
      static_cast<int64_t>(s.batches) * ceil_div(mtiles, p.gm) * ceil_div(ntiles, p.gn);
  const uint32_t max_ck = groups < 4 ? std::max<uint32_t>(1, p.kt / kMinChunks) : p.kt;
  // K-major operands move runs of a group's width whatever the chunk; natural ones move runs of
  // the chunk's K extent, so those want chunks of at least chunk_cap bytes of K.
  uint64_t ck = chunk_cap / std::max(row_a, row_b);
  for (const MatmulSide* o : {&s.a, &s.b}) {
    if (o->natural) ck = std::max<uint64_t>(ck, ceil_div(chunk_cap, P * o->elem_bytes));
  }
  p.ck = static_cast<uint32_t>(std::clamp<uint64_t>(ck, 1, std::max<uint32_t>(1, max_ck)));
  // FP8 x FP8 with double-row matmuls: chunks of whole k-tile pairs.
  const bool fp8_dr =
      s.a.elem_bytes == 1 && s.b.elem_bytes == 1 && core.tensor.fp8_double_row_cost_factor > 0;
  if (fp8_dr && p.kt >= 2) p.ck += p.ck % 2;
  p.chunks = static_cast<uint32_t>(ceil_div(p.kt, p.ck));
  // Steps prepared ahead: about kLookaheadNs of TensorE work, so the loads and transposes of
  // natural operands (each a DMA, TensorE and a copy engine in turn) are ready in time.
  // TensorE time per 128-deep k-tile relative to BF16: fp32 x4; FP8 x FP8 contracts two k-tiles
  // per double-row matmul where the core has that mode.
  const double fp32 = s.a.elem_bytes == 4 ? core.tensor.fp32_cost_factor
                      : fp8_dr            ? 0.5 * core.tensor.fp8_double_row_cost_factor
                                          : 1.0;
  const double step_ns =
      p.ck * p.gm * p.gn *
      std::max<double>(core.tensor.mm_min_ii_cycles, std::min<int64_t>(s.b.tile, s.b.extent)) *
      fp32 / core.tensor.frequency_hz * 1e9;
  p.lookahead = static_cast<uint32_t>(std::clamp(std::ceil(kLookaheadNs / step_ns), 2.0, 16.0));
  p.stage_slots = natural ? std::min<uint32_t>(p.lookahead + 2, max_stage) : 0;
  p.bias_bytes = !s.bias ? 0 : s.bias_column ? p.gm * 4 : (s.bias_rows ? p.gm : 1) * p.gw_b * 4;
  const uint64_t chunk_a = p.ck * row_a, chunk_b = p.ck * row_b;
  // Natural operands stage whole 128-row blocks.
  const uint64_t stage_a = p.ck * ceil_div(p.gw_a, P) * P * s.a.elem_bytes;
  const uint64_t stage_b = p.ck * ceil_div(p.gw_b, P) * P * s.b.elem_bytes;
  const uint64_t fixed =
      p.out_slots * p.gm * p.gn * uint64_t{s.b.tile} * s.out_elem_bytes +
      (s.tmp ? 2 * uint64_t{s.b.tile} * 4 : 0) + 2 * p.bias_bytes +
      (s.a.natural ? p.stage_slots * stage_a : 0) + (s.b.natural ? p.stage_slots * stage_b : 0) +
      (s.transposed_out ? 2 * p.gm * uint64_t{s.a.tile} * s.out_elem_bytes : 0) + kSlack;
  const uint64_t budget = core.sbuf.partition_bytes > fixed ? core.sbuf.partition_bytes - fixed : 0;

  const double dma_bw = core.dma.engines * core.dma.engine_bandwidth_bytes_per_s;

  const double mm_cycles =
      static_cast<double>(s.batches) * mtiles * ntiles * p.kt *
      std::max<double>(core.tensor.mm_min_ii_cycles, std::min<int64_t>(s.b.tile, s.b.extent)) *
      fp32;
  const int64_t groups_a = ceil_div(mtiles, p.gm), groups_b = ceil_div(ntiles, p.gn);

  const bool kmajor = !s.a.natural && !s.b.natural;
  // X resident, Y streamed.
  auto choose = [&](const MatmulSide& X, const MatmulSide& Y, int64_t groups_x, int64_t groups_y,
                    uint64_t chunk_x, uint64_t chunk_y) {
    Choice c;
    for (int64_t rb = groups_x; rb >= 1; --rb) {
      const uint64_t d = rb > 1 ? p.chunks + 2 : kStreamedRing;
      const uint64_t r = static_cast<uint64_t>(rb) * p.chunks;
      if (r * chunk_x + d * chunk_y <= budget) {
        c.rb = static_cast<uint32_t>(rb);
        c.resident_slots = static_cast<uint32_t>(r);
        c.streamed_slots = static_cast<uint32_t>(d);
        // Room for two groups' chunks: the next group's loads need not wait for this group's
        // matmuls to free a slot (and then pay a DMA launch latency). Only when both operands
        // are K-major, whose loads the kernel issues in need order (a natural operand's
        // transposes would then run further ahead of the matmuls).
        const uint64_t two = 2ull * p.chunks;
        if (kmajor && d < two && r * chunk_x + two * chunk_y <= budget) {
          c.streamed_slots = static_cast<uint32_t>(two);
        }
        break;
      }
    }
    double passes_x = 1;
    if (c.rb == 0) {  // not even one group of X fits: it streams too, once per group of Y
      c.rb = 1;
      c.streamed_slots = kStreamedRing;
      c.resident_slots = static_cast<uint32_t>(
          chunk_x ? std::min<uint64_t>(
                        (budget - std::min(budget, kStreamedRing * chunk_y)) / chunk_x, p.chunks)
                  : 0);
      passes_x = static_cast<double>(groups_y);
    }
    const double passes_y = static_cast<double>(ceil_div(groups_x, c.rb));
    const double kx = static_cast<double>(s.k) * X.extent, ky = static_cast<double>(s.k) * Y.extent;
    const double traffic =
        kx * X.elem_bytes * X.batches * passes_x + ky * Y.elem_bytes * s.batches * passes_y;
    const double transposes = (X.natural ? kx * X.batches * passes_x / P : 0) +
                              (Y.natural ? ky * s.batches * passes_y / P : 0);
    c.traffic_s = traffic / dma_bw;
    c.estimate = std::max(c.traffic_s, (mm_cycles + transposes) / core.tensor.frequency_hz);
    if (c.resident_slots < 1 && p.chunks > 0) c.estimate = 1e300;  // does not fit
    return c;
  };
  const Choice ca = choose(s.a, s.b, groups_a, groups_b, chunk_a, chunk_b);
  const Choice cb = choose(s.b, s.a, groups_b, groups_a, chunk_b, chunk_a);
  if (ca.estimate >= 1e300 && cb.estimate >= 1e300) {
    p.estimate_s = 1e300;
    return p;
  }
  p.a_resident = ca.better_than(cb);
  const Choice& c = p.a_resident ? ca : cb;
  p.rb = c.rb;
  p.resident_slots = c.resident_slots;
  p.streamed_slots = c.streamed_slots;
  p.estimate_s = c.estimate;
  return p;
}

}  // namespace

MatmulPlan plan_matmul(const MatmulShape& s, const device_model::CoreParams& core) {
  // The largest PSUM groups, output slots and chunks that fit; smaller ones on a small SBUF.
  const uint32_t tr_banks = (s.a.natural || s.b.natural || s.transposed_out) ? 2 : 0;
  const uint32_t max_banks = std::max<uint32_t>(1, (core.psum.banks - tr_banks) / 2);
  for (uint32_t banks = max_banks; banks >= 1; --banks) {
    for (uint32_t out_slots : {3u, 2u}) {
      for (uint64_t cap = kChunkBytes; cap >= 256; cap /= 4) {
        for (uint32_t stage : {kMaxStageSlots, 3u}) {
          const MatmulPlan p = plan_with(s, core, banks, out_slots, cap, stage);
          if (p.estimate_s < 1e300) return p;
        }
      }
    }
  }
  throw std::invalid_argument(
      fmt::format("matmul: contraction {} too large for SBUF tiling ({} bytes per partition)", s.k,
                  core.sbuf.partition_bytes));
}

}  // namespace neuronsim::kernels
