#include "column_reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

// Note [Outer-dim reductions]
// x.amax(0) of a row-major [R, C] matrix keeps the contiguous dim. Loading the kept columns onto
// partitions directly would move one element per descriptor; instead whole rows (runs of up to
// 1024 columns) load onto partitions, one reduced row per partition, and TensorE transposes
// each [rows, 128 columns] slice into PSUM, where the columns are partitions and the rows the
// free dim: VectorE folds them with one tensor_reduce per slice into a column of per-block
// partials (folded once at the end). Narrow matrices (C <= 64) whose rows are dense put g =
// 128 / C consecutive rows side by side on a partition, so a slice [rows, g*C] transposes onto
// g*C partitions (j, c); the g partials of each column fold after a transpose back to a row.
// var/std run the same sweep twice: the sums give the mean, which reaches the partitions of the
// second sweep as a per-partition bias, and ScalarE squares (x - mean) with an accumulating
// activation (one per block of up to four resident row tiles side by side in a PSUM bank); the
// column groups are software-pipelined (first sweep, second sweep, results of three groups in
// flight) so the engines overlap. The input stays in SBUF between the sweeps when it fits, else
// it is loaded twice. Results leave as rows: the [Q, blocks] results transposed to [blocks, Q]
// (narrow: to [1, g*C] and folded over j) and stored contiguously.

namespace {

constexpr int64_t kMaxGroupCols = 1024;    // columns per loaded row: 4 KiB runs of fp32
constexpr int64_t kRunElems = 2048;        // narrow dense rows: elements per partition per load
constexpr uint64_t kRingBytes = 64 << 10;  // per partition: load buffers when not resident
constexpr int kLoadQueues = 2;             // few: the first rows arrive early and VectorE starts
constexpr int kSets = 3;                   // buffer sets of partials and results: groups in flight
constexpr int kRegions = 16;               // PSUM [128, 128] fp32 regions (4 banks)
constexpr int64_t kCols = 128;             // partial columns per block before a fold
constexpr uint64_t kResidentBytes = 96 << 10;  // per partition, for var/std's two sweeps

struct Layout {
  int64_t group_cols;  // columns per loaded row (the last group may be narrower)
  int64_t g;           // rows side by side on a partition (narrow dense rows), else 1
  int64_t k;           // rows per partition per load (a multiple of g)
};

Layout choose_layout(int64_t cols, int64_t row_stride, uint32_t edge) {
  if (cols <= edge) {
    if (row_stride != cols) return {cols, 1, 1};
    const int64_t g = edge / cols;
    return {cols, g, g * std::max<int64_t>(1, kRunElems / (g * cols))};
  }
  const int64_t groups = (cols + kMaxGroupCols - 1) / kMaxGroupCols;
  const int64_t per = (cols + groups - 1) / groups;
  return {(per + edge - 1) / edge * edge, 1, 1};
}

// One load: rows [row, row + p * kt) of outer reduced index o, kt rows per partition, of which
// gt sit side by side in each transposed slice.
struct RowTile {
  int64_t o, row;
  uint32_t p;
  int64_t kt, gt;
};

template <typename Fn>
void for_each_row_tile(int64_t outer, int64_t rows, const Layout& L, uint32_t P, Fn&& fn) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t row = 0; row < rows;) {
      const int64_t n = rows - row;
      RowTile t{o, row, 1, 1, 1};
      if (n >= L.k) {
        t = {o, row, static_cast<uint32_t>(std::min<int64_t>(P, n / L.k)), L.k, L.g};
      } else if (n >= L.g) {
        t = {o, row, static_cast<uint32_t>(n / L.g), L.g, L.g};
      } else {
        t = {o, row, static_cast<uint32_t>(n), 1, 1};
      }
      fn(t);
      row += int64_t{t.p} * t.kt;
    }
  }
}

float identity_of(ReduceOp op) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (op) {
    case ReduceOp::kAdd:
      return 0.0f;
    case ReduceOp::kMax:
      return -inf;
    case ReduceOp::kMin:
      return inf;
    case ReduceOp::kMultiply:
      return 1.0f;
  }
  return 0.0f;
}

// DMA time estimate (ns) of moving `bytes` as runs of `run_bytes` spread over `partitions`
// SBUF partitions: packets per engine at the descriptor overhead plus the engines' data time.
double dma_estimate_ns(double bytes, double run_bytes, double partitions, const DmaParams& d) {
  const double engines = std::clamp(std::ceil(partitions / d.partitions_per_engine), 1.0,
                                    static_cast<double>(d.engines));
  const double runs = bytes / std::max(1.0, run_bytes);
  const double packets = runs * std::ceil(run_bytes / d.packet_bytes);
  return packets / engines * d.descriptor_overhead_ns +
         bytes / (engines * d.engine_bandwidth_bytes_per_s) * 1e9;
}

// res [g * cw, 1] (partition j * cw + c: partial j of column c) -> row [1, cw] at `row`: a
// transpose into PSUM at prow_off, then the g partials of each column folded by VectorE.
void fold_g_to_row(ProgramBuilder& b, const AccessPattern& res, uint32_t cw, int64_t g,
                   uint64_t prow_off, ReduceOp op, const AccessPattern& row, Token& res_free,
                   Token& prow_free) {
  b.wait(kTensor, b.mark(kVector));
  b.wait(kTensor, prow_free);
  b.emit(kTensor, isa::transpose(isa::psum_tile(DType::kFp32, 1, prow_off, res.partitions), res));
  res_free = b.mark(kTensor);
  b.wait(kVector, res_free);
  AccessPattern view =
      isa::sbuf(DType::kFp32, 0, 1, prow_off, {{1, cw}, {int64_t{cw}, static_cast<uint32_t>(g)}});
  view.space = MemSpace::kPsum;
  b.emit(kVector, isa::tensor_reduce(row, view, op));
  prow_free = b.mark(kVector);
}

}  // namespace

bool prefer_transposed_rows(const OuterReduce& r, const CoreParams& core) {
  const uint32_t P = core.sbuf.partitions;
  const int64_t cols = r.kept_sizes.back();
  const int64_t rows = r.red_sizes.back();
  const double bytes = 4.0 * static_cast<double>(cols) * static_cast<double>(rows);
  // Columns per partition: runs of W columns (as build_reduce's column kernel chooses them).
  const int64_t w = std::clamp<int64_t>((cols + P - 1) / P, 1, 1024);
  const double by_columns =
      dma_estimate_ns(bytes, 4.0 * w, std::min<double>(P, static_cast<double>(cols) / w), core.dma);
  const Layout L = choose_layout(cols, r.red_strides.back(), core.tensor.columns);
  const double by_rows =
      dma_estimate_ns(bytes, 4.0 * static_cast<double>(L.k * L.group_cols),
                      std::min<double>(P, std::ceil(static_cast<double>(rows) / L.k)), core.dma);
  return by_rows <= by_columns;
}

Program build_transposed_column_reduce(const std::string& name, const TensorDesc& in,
                                       const TensorDesc& out, const ReduceSpec& spec,
                                       const OuterReduce& r, const CoreParams& core) {
  if (spec.arg || spec.nonzero || spec.abs || spec.power != 1.0f || spec.root != 1.0f ||
      (spec.op == ReduceOp::kAdd && !spec.variance) || (spec.sqrt && !spec.variance)) {
    throw std::invalid_argument(
        fmt::format("{}: the transposed-rows reduction takes max/min/prod or var/std", name));
  }
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const uint32_t E = std::min(core.tensor.columns, core.tensor.rows);  // transpose edge
  const int64_t cols = r.kept_sizes.back(), out_stride = r.kept_strides[1].back();
  const int64_t rows = r.red_sizes.back(), row_stride = r.red_strides.back();
  const int64_t outer = r.red_sizes.size() == 2 ? r.red_sizes[0] : 1;
  const int64_t outer_stride = r.red_sizes.size() == 2 ? r.red_strides[0] : 0;
  const int64_t count = outer * rows;
  const Layout L = choose_layout(cols, row_stride, E);
  const int64_t max_blocks = (L.group_cols + E - 1) / E;
  const ReduceOp op = spec.variance ? ReduceOp::kAdd : spec.op;
  const uint64_t tile_bytes = uint64_t(L.k * L.group_cols) * 4;

  // Tiles per group (every group has the same rows) decide whether var/std keep them resident.
  int64_t tiles = 0;
  for_each_row_tile(outer, rows, L, P, [&](const RowTile&) { ++tiles; });
  // Resident: var/std keep a group's tiles for the second sweep, two groups' worth when they
  // fit (the next group loads during this one's second sweep).
  const bool resident = spec.variance && uint64_t(tiles) * tile_bytes <= kResidentBytes;
  const int64_t group_sets = resident && 2 * uint64_t(tiles) * tile_bytes <= kResidentBytes ? 2 : 1;
  const int64_t ring = std::max<int64_t>(3, static_cast<int64_t>(kRingBytes / tile_bytes));
  const int64_t slots = resident ? group_sets * tiles : std::min(ring, tiles * 2);

  const uint64_t x_off = b.alloc_sbuf(uint64_t(slots) * tile_bytes);
  // Partial columns, column-major: column col of block blk at (col * max_blocks + blk), so one
  // instruction folds every block's columns into res [Q, blocks].
  const uint64_t acc_base = b.alloc_sbuf(kSets * uint64_t(max_blocks) * kCols * 4);
  const uint64_t res_base = b.alloc_sbuf(kSets * uint64_t(max_blocks) * 4);
  const uint64_t fold_off = b.alloc_sbuf(uint64_t(max_blocks) * 4);
  const uint64_t nmean_base =
      b.alloc_sbuf(kSets * uint64_t(max_blocks) * 4);  // -mean per partition
  const uint64_t sq_off = spec.variance ? b.alloc_sbuf(4 * uint64_t(E) * 4) : 0;  // ScalarE dst
  const uint64_t sum_off = b.alloc_sbuf(uint64_t(E) * 4);                         // [1, C] sums
  const uint64_t row_off = b.alloc_sbuf(kSets * uint64_t(E) * 4);                 // result rows
  uint64_t region_off[kRegions];
  for (int i = 0; i < kRegions; i += 4) {
    const uint64_t bank = b.alloc_psum_bank();
    for (int j = 0; j < 4; ++j) region_off[i + j] = bank + uint64_t(j) * E * 4;
  }
  const uint64_t prow_off = b.alloc_psum_bank();  // [blocks, Q] or [1, Q] transposed results
  const uint64_t pcol_off = b.alloc_psum_bank();  // [Q, 1] broadcast sums
  const StreamId qout = dma_queue(kLoadQueues);
  std::vector<Token> slot_free(static_cast<size_t>(slots));
  Token region_free[kRegions], row_free[kSets], res_free_of[kSets], mean_ready[kSets], prow_free,
      pcol_free;
  uint64_t loads = 0, regions = 0;
  const float identity = identity_of(op);

  struct GroupAt {
    int64_t in_base, out_base, c0;
  };
  std::vector<GroupAt> group_list;
  for_each_outer_kept(r.kept_sizes, r.kept_strides, [&](int64_t in_base, int64_t out_base) {
    for (int64_t c0 = 0; c0 < cols; c0 += L.group_cols)
      group_list.push_back({in_base, out_base, c0});
  });
  // Group gi's first sweep (phase 0, with var/std's mean), var/std's second sweep (phase 1),
  // or its results (phase 2). Consecutive groups rotate through kSets buffer sets (par).
  auto group_phase = [&](size_t gi, int phase) {
    {
      const int64_t in_base = group_list[gi].in_base, out_base = group_list[gi].out_base,
                    c0 = group_list[gi].c0;
      const int par = static_cast<int>(gi % kSets);
      const int64_t set = static_cast<int64_t>(gi % uint64_t(group_sets));  // resident rows
      const uint64_t acc_off = acc_base + uint64_t(par) * max_blocks * kCols * 4;
      const uint64_t res_off = res_base + uint64_t(par) * max_blocks * 4;
      const uint64_t nmean_off = nmean_base + uint64_t(par) * max_blocks * 4;
      Token& res_free = res_free_of[par];
      const int64_t gw = std::min<int64_t>(L.group_cols, cols - c0);
      const int nb = static_cast<int>((gw + E - 1) / E);
      auto block_cols = [&](int blk) { return std::min<int64_t>(E, gw - int64_t(blk) * E); };
      auto q_of = [&](int blk, int64_t gt) { return static_cast<uint32_t>(gt * block_cols(blk)); };
      // Every block's partitions (the first block is the widest; a narrower last block's
      // extra partitions hold values nothing stores).
      const uint32_t qmax = q_of(0, L.g);
      auto acc_col = [&](int blk, int64_t col, uint32_t parts) {
        return isa::sbuf_tile(DType::kFp32, parts,
                              acc_off + (uint64_t(col) * max_blocks + uint64_t(blk)) * 4, 1);
      };
      // The partial columns [qmax, nb, n] as folded (innermost: the columns).
      auto acc_view = [&](int64_t n) {
        return isa::sbuf(DType::kFp32, 0, qmax, acc_off,
                         {{1, static_cast<uint32_t>(nb)}, {max_blocks, static_cast<uint32_t>(n)}});
      };
      const AccessPattern res_all =
          isa::sbuf_tile(DType::kFp32, qmax, res_off, static_cast<uint32_t>(nb));
      auto res = [&](int blk, uint32_t parts) {
        return isa::sbuf_tile(DType::kFp32, parts, res_off + uint64_t(blk) * 4, 1);
      };
      auto nmean = [&](int blk, uint32_t parts) {
        return isa::sbuf_tile(DType::kFp32, parts, nmean_off + uint64_t(blk) * 4, 1);
      };

      // One sweep over the group's rows: load (unless resident and already loaded), transpose
      // each slice, fold it into the block's next partial column; then fold the columns.
      auto sweep = [&](bool second) {
        int64_t col = 0, tile_index = 0;
        const StreamId folder = second ? kScalar : kVector;
        for_each_row_tile(outer, rows, L, P, [&](const RowTile& t) {
          const int64_t slot =
              resident ? set * tiles + tile_index : static_cast<int64_t>(loads % uint64_t(slots));
          ++tile_index;
          const uint64_t at = x_off + uint64_t(slot) * tile_bytes;
          if (!(second && resident)) {
            const StreamId q = dma_queue(static_cast<uint8_t>(loads++ % kLoadQueues));
            const int64_t e = in_base + c0 + t.o * outer_stride + t.row * row_stride;
            b.wait(q, slot_free[size_t(slot)]);
            b.emit(q, isa::dma_copy(
                          isa::sbuf_tile(DType::kFp32, t.p, at, static_cast<uint32_t>(t.kt * gw)),
                          hbm_ap(in, e, t.p, t.kt * row_stride,
                                 {{1, static_cast<uint32_t>(t.kt * gw)}})));
            b.wait(kTensor, b.mark(q));
          }
          for (int64_t s = 0; s < t.kt / t.gt; ++s) {
            if (col == kCols) {  // fold the full columns into column 0
              b.wait(kVector, b.mark(folder));
              const AccessPattern fold =
                  isa::sbuf_tile(DType::kFp32, qmax, fold_off, static_cast<uint32_t>(nb));
              b.emit(kVector, isa::tensor_reduce(fold, acc_view(kCols), op));
              b.emit(kVector, isa::tensor_copy(isa::sbuf_tile(DType::kFp32, qmax, acc_off,
                                                              static_cast<uint32_t>(nb)),
                                               fold));
              col = 1;
              b.wait(folder, b.mark(kVector));
            }
            for (int blk = 0; blk < nb; ++blk) {
              const uint32_t q = q_of(blk, t.gt), qfull = q_of(blk, L.g);
              const int ri = static_cast<int>(regions++ % kRegions);
              const uint64_t src_at = at + uint64_t(s * t.gt * gw + int64_t(blk) * E) * 4;
              const AccessPattern region = isa::psum_tile(DType::kFp32, q, region_off[ri], t.p);
              b.wait(kTensor, region_free[ri]);
              b.emit(kTensor, isa::transpose(region, isa::sbuf_tile(DType::kFp32, t.p, src_at, q)));
              b.wait(folder, b.mark(kTensor));
              if (q < qfull) {  // partitions this slice does not reach hold the identity
                b.emit(kVector, isa::memset(acc_col(blk, col, qfull), identity));
                b.wait(folder, b.mark(kVector));
              }
              if (second) {
                Instruction sq = isa::activation(isa::sbuf_tile(DType::kFp32, q, sq_off, t.p),
                                                 region, ActFunc::kSquare, isa::imm(1.0f),
                                                 isa::per_partition(nmean(blk, q)));
                sq.acc_dst = acc_col(blk, col, q);
                sq.has_acc_dst = true;
                b.emit(kScalar, sq);
              } else {
                b.emit(kVector, isa::tensor_reduce(acc_col(blk, col, q), region, op));
              }
              region_free[ri] = b.mark(folder);
            }
            ++col;
          }
          slot_free[size_t(slot)] = b.mark(kTensor);
        });
        b.wait(kVector, b.mark(folder));
        b.wait(kVector, res_free);
        b.emit(kVector, isa::tensor_reduce(res_all, acc_view(col), op));
      };

      // var/std's second sweep over resident rows, block by block: the block's slices of up to
      // four row tiles side by side in one PSUM bank, squared and summed by one ScalarE
      // activation (its fixed cost paid per bank, not per slice).
      auto second_sweep_resident = [&]() {
        int64_t col = 0;
        for (int blk = 0; blk < nb; ++blk) {
          col = 0;
          int64_t fill = 0, batch_gt = 0;
          int bank = 0;
          const uint32_t qfull = q_of(blk, L.g);
          auto flush = [&]() {
            if (fill == 0) return;
            const uint32_t q = q_of(blk, batch_gt);
            if (col == kCols) {  // fold this block's full columns into its column 0
              b.wait(kVector, b.mark(kScalar));
              const AccessPattern fold = isa::sbuf_tile(DType::kFp32, qfull, fold_off, 1);
              b.emit(kVector, isa::tensor_reduce(
                                  fold,
                                  isa::sbuf(DType::kFp32, 0, qfull, acc_off + uint64_t(blk) * 4,
                                            {{max_blocks, static_cast<uint32_t>(kCols)}}),
                                  ReduceOp::kAdd));
              b.emit(kVector, isa::tensor_copy(acc_col(blk, 0, qfull), fold));
              col = 1;
              b.wait(kScalar, b.mark(kVector));
            }
            if (q < qfull) {
              b.emit(kVector, isa::memset(acc_col(blk, col, qfull), 0.0f));
              b.wait(kScalar, b.mark(kVector));
            }
            b.wait(kScalar, b.mark(kTensor));
            const uint32_t n = static_cast<uint32_t>(fill);
            Instruction sq = isa::activation(
                isa::sbuf_tile(DType::kFp32, q, sq_off, n),
                isa::psum_tile(DType::kFp32, q, region_off[4 * bank], n), ActFunc::kSquare,
                isa::imm(1.0f), isa::per_partition(nmean(blk, q)));
            sq.acc_dst = acc_col(blk, col, q);
            sq.has_acc_dst = true;
            b.emit(kScalar, sq);
            const Token done = b.mark(kScalar);
            for (int j = 0; j < 4; ++j) region_free[4 * bank + j] = done;
            ++col;
            fill = 0;
          };
          int64_t tile_index = 0;
          for_each_row_tile(outer, rows, L, P, [&](const RowTile& t) {
            const uint64_t at = x_off + uint64_t(set * tiles + tile_index++) * tile_bytes;
            for (int64_t s = 0; s < t.kt / t.gt; ++s) {
              if (fill > 0 && (fill + t.p > 4 * int64_t{E} || t.gt != batch_gt)) flush();
              if (fill == 0) {
                bank = static_cast<int>(regions++ % (kRegions / 4));
                for (int j = 0; j < 4; ++j) b.wait(kTensor, region_free[4 * bank + j]);
                batch_gt = t.gt;
              }
              const uint32_t q = q_of(blk, t.gt);
              const uint64_t src_at = at + uint64_t(s * t.gt * gw + int64_t(blk) * E) * 4;
              b.emit(kTensor, isa::transpose(isa::psum_tile(DType::kFp32, q,
                                                            region_off[4 * bank] + fill * 4, t.p),
                                             isa::sbuf_tile(DType::kFp32, t.p, src_at, q)));
              fill += t.p;
            }
          });
          flush();
        }
        const Token read = b.mark(kTensor);
        for (int64_t i = 0; i < tiles; ++i) slot_free[size_t(set * tiles + i)] = read;
        b.wait(kVector, b.mark(kScalar));
        b.wait(kVector, res_free);
        b.emit(kVector, isa::tensor_reduce(res_all, acc_view(col), ReduceOp::kAdd));
      };

      // -mean on every partition (j, c) of each block (g > 1: the sums as a row, folded over
      // j and broadcast back), right after the first sweep so the second can start.
      auto mean_of_sweep = [&]() {
        const float neg_inv = -1.0f / static_cast<float>(count);
        const AccessPattern nmean_all =
            isa::sbuf_tile(DType::kFp32, qmax, nmean_off, static_cast<uint32_t>(nb));
        if (L.g == 1) {
          b.emit(kVector,
                 isa::tensor_scalar(nmean_all, res_all, AluOp::kMultiply, isa::imm(neg_inv)));
        } else {
          const uint32_t cw = static_cast<uint32_t>(block_cols(0));
          fold_g_to_row(b, res(0, qmax), cw, L.g, prow_off, op,
                        isa::sbuf_tile(DType::kFp32, 1, sum_off, cw), res_free, prow_free);
          const AccessPattern pcol = isa::psum_tile(DType::kFp32, qmax, pcol_off, 1);
          b.wait(kTensor, b.mark(kVector));
          b.wait(kTensor, pcol_free);
          b.emit(kTensor,
                 isa::transpose(pcol, isa::sbuf(DType::kFp32, 0, 1, sum_off,
                                                {{0, static_cast<uint32_t>(L.g)}, {1, cw}})));
          b.wait(kVector, b.mark(kTensor));
          b.emit(kVector,
                 isa::tensor_scalar(nmean(0, qmax), pcol, AluOp::kMultiply, isa::imm(neg_inv)));
          pcol_free = b.mark(kVector);
        }
        mean_ready[par] = b.mark(kVector);
      };

      if (phase == 0) {
        sweep(false);
        if (spec.variance) mean_of_sweep();
        return;
      }
      if (phase == 1) {
        b.wait(kScalar, mean_ready[par]);
        if (resident) {
          second_sweep_resident();
        } else {
          sweep(true);
        }
        return;
      }
      // The group's results: scaled (var: 1 / dof) and rooted (std) as columns, transposed to
      // rows and stored.
      if (spec.scale != 1.0f) {
        b.emit(kVector,
               isa::tensor_scalar(res_all, res_all, AluOp::kMultiply, isa::imm(spec.scale)));
      }
      const int rb = par;
      const uint64_t row_at = row_off + uint64_t(rb) * E * 4;
      if (L.g == 1) {
        Token ready = b.mark(kVector);
        if (spec.sqrt) {
          b.wait(kScalar, ready);
          b.emit(kScalar, isa::activation(res_all, res_all, ActFunc::kSqrt));
          ready = b.mark(kScalar);
        }
        // res [qmax, nb] -> [nb, qmax]: row blk is block blk's results.
        const AccessPattern prow =
            isa::psum_tile(DType::kFp32, static_cast<uint32_t>(nb), prow_off, qmax);
        b.wait(kTensor, ready);
        b.wait(kTensor, prow_free);
        b.emit(kTensor, isa::transpose(prow, res_all));
        res_free = b.mark(kTensor);
        const AccessPattern rows_sb =
            isa::sbuf_tile(DType::kFp32, static_cast<uint32_t>(nb), row_at, qmax);
        b.wait(kVector, res_free);
        b.wait(kVector, row_free[rb]);
        b.emit(kVector, isa::tensor_copy(rows_sb, prow));
        prow_free = b.mark(kVector);
        b.wait(qout, prow_free);
        // Full blocks in one transfer, a narrower last block in another.
        const int full = block_cols(nb - 1) == E ? nb : nb - 1;
        if (full > 0) {
          b.emit(qout, isa::dma_copy(
                           hbm_ap(out, out_base + c0 * out_stride, static_cast<uint32_t>(full),
                                  E * out_stride, {{out_stride, E}}),
                           isa::sbuf_tile(DType::kFp32, static_cast<uint32_t>(full), row_at, E)));
        }
        if (full < nb) {
          const uint32_t cw = static_cast<uint32_t>(block_cols(nb - 1));
          AccessPattern last = isa::sbuf_tile(DType::kFp32, 1, row_at, cw);
          last.start_partition = static_cast<uint32_t>(nb - 1);
          b.emit(qout, isa::dma_copy(hbm_ap(out, out_base + (c0 + int64_t(nb - 1) * E) * out_stride,
                                            1, 0, {{out_stride, cw}}),
                                     last));
        }
      } else {
        const uint32_t cw = static_cast<uint32_t>(block_cols(0));
        const AccessPattern row = isa::sbuf_tile(DType::kFp32, 1, row_at, cw);
        b.wait(kVector, row_free[rb]);
        fold_g_to_row(b, res(0, qmax), cw, L.g, prow_off, op, row, res_free, prow_free);
        Token ready = prow_free;
        if (spec.sqrt) {
          b.wait(kScalar, ready);
          b.emit(kScalar, isa::activation(row, row, ActFunc::kSqrt));
          ready = b.mark(kScalar);
        }
        b.wait(qout, ready);
        b.emit(qout, isa::dma_copy(hbm_ap(out, out_base + c0 * out_stride, 1, 0,
                                          {{out_stride, static_cast<uint32_t>(gw)}}),
                                   row));
      }
      row_free[rb] = b.mark(qout);
      if (spec.sqrt) b.wait(kScalar, row_free[rb]);
    }
  };
  // var/std: step i emits group i's first sweep, group i - 1's second and group i - 2's
  // results, so VectorE's sums, ScalarE's squares and TensorE's transposes of neighbouring
  // groups overlap (three buffer sets; the resident rows of two groups). With one set of
  // resident rows the next group's loads would wait for this group's second sweep: in order.
  const size_t n = group_list.size();
  if (!spec.variance || (resident && group_sets < 2)) {
    for (size_t gi = 0; gi < n; ++gi) {
      group_phase(gi, 0);
      if (spec.variance) group_phase(gi, 1);
      group_phase(gi, 2);
    }
  } else {
    for (size_t step = 0; step < n + 2; ++step) {
      if (step < n) group_phase(step, 0);
      if (step >= 1 && step - 1 < n) group_phase(step - 1, 1);
      if (step >= 2 && step - 2 < n) group_phase(step - 2, 2);
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
