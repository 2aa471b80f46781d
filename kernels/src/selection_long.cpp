// Selection for long rows (kernels/selection.h, Note [Long-row selection]).
//
// Note [Long-row selection]
// The short-row kernels (selection.cpp) put one row per partition and pick one element per
// round over the whole row, so a 32000-long vocab row costs k rounds over 32000 elements on a
// single lane. These kernels spread one row over all 128 partitions instead.
//
// Keys. Every element becomes an fp32 pair (key, sec) compared lexicographically, smaller
// first: the ordering the caller wants is "key ascending, then sec ascending".
//   key = x (smallest first: sort ascending, topk smallest) or -x (largest first), NaN -> +inf
//         (resp. -inf after the negation): NaN sorts last ascending and first descending, as
//         PyTorch orders NaN above +inf;
//   sec = e + kNanFlag * [the element's NaN class is the later one], e the element's index in
//         its row, so equal keys keep the lower index first (a stable sort, topk's tie order)
//         and NaNs fall behind (ascending) or ahead (descending) of real infinities. Padding
//         (positions e >= n of a row rounded up) gets key +inf and sec >= kPadFlag: after all.
// sec is an integer below 2^24, exact in fp32, so both halves compare exactly on VectorE's fp32
// path and move through TensorE transposes (fp32 data moves) bit for bit. A value comes back
// as +-key (a zero keeps its sign: -(-x) is x), NaN where sec says so; the index is sec mod
// kNanFlag.
//
// topk (build_topk_long): row element e = p * C + f (C = ceil(n / 128) per partition, G rows
// side by side on the free axis, each chunk padded to Cp = 2^ceil(log2 C) slots).
// - Stage 1, per partition: sort blocks of K = 2^ceil(log2 k) slots with compare-exchange
//   stages, then merge neighbouring blocks (the elementwise smaller of a block and its reversed
//   neighbour holds the K smallest of the two as a bitonic sequence; log2 K half-cleaner stages
//   sort it) until one list of K remains. Up to four candidates are picked by rounds instead (7
//   instructions over the chunk: min key; the smallest sec holding it; that element removed).
// - Stage 2 merges the 128 sorted lists of a row the same way over 7 levels, a DMA bringing the
//   upper half of the active partitions' lists, reversed, next to the lower half.
// Cost: log2 K (log2 K + 1) / 2 stages over G * C / 2 pairs plus the halving merges, and 7
// levels of 6 + 8 log2 K small instructions, instead of k rounds of 8 instructions over n
// elements on one lane.
//
// sort (build_sort_long): a bitonic sorting network over N = 2^L >= n elements, element
// e = p * F + f (F = N / 128). A compare-exchange stage over partner distance 2^t is 8
// VectorE instructions over all N / 2 pairs of the G rows at once (strided access patterns
// pick the lower and upper elements of every pair), plus one XOR with the phase's direction
// mask while blocks alternate direction. Stages whose partner lives on another partition
// (t >= log2 F) run after TensorE transposes of 128 x 128 blocks, which turn the partition
// bits of e into free bits; the result is transposed back before the in-partition stages.
// Cost: L (L + 1) / 2 stages of 9 instructions over N / 2 pairs per lane group, i.e.
// O(N log^2 N / 128) element-cycles, plus 2 (L - log2 F) transposes of the tile.
//
// A compare-exchange stage: three compares (key >, key ==, sec >), a select combining them into
// "swap" (XORed with the direction), four selects writing both sides to the other buffer. The
// swap masks live in PSUM where they fit (Masks), which halves the selects' cost.
//
// cumsum/cumprod (build_scan_long): Hillis-Steele scans of each partition's chunk, the chunk
// totals scanned across partitions after a TensorE transpose, added back.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/selection.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using AP = AccessPattern;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNanFlag = 4194304.0f;  // 2^22: sec offset of the NaN class placed later
constexpr float kPadFlag = 8388608.0f;  // 2^23: sec offset of padding (after everything)
constexpr float kGone = 3.0e38f;        // sec of removed elements and empty candidate slots
constexpr int64_t kMaxLongLength = int64_t{1} << 22;  // e < kNanFlag
constexpr uint32_t kLongRowGroup = 16;                // at most this many rows per tile
constexpr uint64_t kAlignSlack = 24 * 64;  // SBUF allocations are 64-byte aligned (< 24 of them)

AP sb(uint32_t start, uint32_t parts, uint64_t off, std::initializer_list<Dim> dims) {
  return isa::sbuf(DType::kFp32, start, parts, off, dims);
}

uint32_t ceil_pow2(uint64_t v) {
  return static_cast<uint32_t>(std::bit_ceil(std::max<uint64_t>(v, 1)));
}

uint32_t log2u(uint32_t v) {
  return static_cast<uint32_t>(std::countr_zero(v));
}

RowView view_of(const TensorDesc& t, int64_t dim, const char* what) {
  const auto v = row_view(t, dim);
  if (!v)
    throw std::invalid_argument(fmt::format("{}: {} does not fold into rows", what, t.to_string()));
  return *v;
}

// Keys and secs of the same shape (one operand of a compare).
struct Pair {
  AP k, s;
};

// The three compare masks of a stage. m0 and m1 live in PSUM when they fit: VectorE's
// predicated copies (the four selects of a compare-exchange) take N cycles with the predicate in
// PSUM and the data in SBUF instead of 2N, and so do a select and an XOR with one PSUM input
// (ISA-2.26 tensor_copy_predicated, tensor_tensor). m2 stays in SBUF so the select combining
// the masks reads one operand from each.
struct Masks {
  bool psum = false;
  uint64_t off[3] = {0, 0, 0};
  AP at(int i, uint32_t parts, uint32_t count) const {
    if (psum && i < 2) return isa::psum_tile(DType::kFp32, parts, off[i], count);
    return sb(0, parts, off[i], {{1, count}});
  }
  void get(uint32_t parts, uint32_t count, AP out[3]) const {
    for (int i = 0; i < 3; ++i) out[i] = at(i, parts, count);
  }
};

// Allocates masks of `count` fp32 per partition: m0 and m1 in PSUM banks when both fit.
Masks alloc_masks(ProgramBuilder& b, uint64_t count, uint32_t psum_banks_free,
                  const CoreParams& core) {
  Masks m;
  const uint64_t bank = core.psum.bank_bytes();
  const uint64_t banks_each = (count * 4 + bank - 1) / bank;
  m.psum = count <= core.vector.max_free_elements_psum && 2 * banks_each <= psum_banks_free;
  for (int i = 0; i < 3; ++i) {
    if (m.psum && i < 2) {
      m.off[i] = b.alloc_psum_bank();
      for (uint64_t j = 1; j < banks_each; ++j) b.alloc_psum_bank();
    } else {
      m.off[i] = b.alloc_sbuf(count * 4);
    }
  }
  return m;
}

// m0 = (x > y) lexicographically on (key, sec): the secs' order where the keys are equal, else
// the keys'. m1, m2 scratch of the same shape.
void lex_greater(ProgramBuilder& b, const Pair& x, const Pair& y, const AP& m0, const AP& m1,
                 const AP& m2) {
  b.emit(kVector, isa::tensor_tensor(m0, x.k, y.k, AluOp::kIsGt));
  b.emit(kVector, isa::tensor_tensor(m1, x.k, y.k, AluOp::kIsEqual));
  b.emit(kVector, isa::tensor_tensor(m2, x.s, y.s, AluOp::kIsGt));
  b.emit(kVector, isa::select(m0, m1, m2, m0));
}

// One compare-exchange stage: (olo, ohi) = (lo, hi) ordered ascending, or descending where
// `dir` is 1. The outputs must not overlap the inputs.
void compare_exchange(ProgramBuilder& b, const Pair& lo, const Pair& hi, const Pair& olo,
                      const Pair& ohi, const AP masks[3], const AP* dir) {
  lex_greater(b, lo, hi, masks[0], masks[1], masks[2]);
  if (dir) b.emit(kVector, isa::tensor_tensor(masks[0], masks[0], *dir, AluOp::kLogicalXor));
  b.emit(kVector, isa::select(olo.k, masks[0], hi.k, lo.k));
  b.emit(kVector, isa::select(ohi.k, masks[0], lo.k, hi.k));
  b.emit(kVector, isa::select(olo.s, masks[0], hi.s, lo.s));
  b.emit(kVector, isa::select(ohi.s, masks[0], lo.s, hi.s));
}

// Keys from the loaded values in `kv.k` (in place) and secs into `kv.s`: `e` is each element's
// index in its row (fp32, the same shape), `valid` 1 where a slot holds an element of the row
// (the others become padding), `w` scratch.
void make_keys(ProgramBuilder& b, const Pair& kv, const AP& e, const AP& valid, const AP& w,
               bool smallest_first) {
  b.emit(kVector, isa::tensor_tensor(w, kv.k, kv.k, AluOp::kIsEqual));  // 1: not NaN
  b.emit(kVector, isa::select(kv.k, w, kv.k, kInf));
  if (!smallest_first)
    b.emit(kVector, isa::tensor_scalar(kv.k, kv.k, AluOp::kMultiply, isa::imm(-1.0f)));
  // Ascending: NaN after real +inf (sec + kNanFlag for NaN); descending: NaN first.
  b.emit(kVector, smallest_first
                      ? isa::tensor_scalar(kv.s, w, AluOp::kMultiply, isa::imm(-kNanFlag),
                                           AluOp::kAdd, isa::imm(kNanFlag))
                      : isa::tensor_scalar(kv.s, w, AluOp::kMultiply, isa::imm(kNanFlag)));
  b.emit(kVector, isa::tensor_tensor(kv.s, kv.s, e, AluOp::kAdd));
  // Padding: key +inf, sec + kPadFlag.
  b.emit(kVector, isa::select(kv.k, valid, kv.k, kInf));
  b.emit(kVector, isa::tensor_scalar(w, valid, AluOp::kMultiply, isa::imm(-kPadFlag), AluOp::kAdd,
                                     isa::imm(kPadFlag)));
  b.emit(kVector, isa::tensor_tensor(kv.s, kv.s, w, AluOp::kAdd));
}

// Values (in place of the keys) and indices (in place of the secs) from sorted pairs; `w`
// scratch of the same shape.
void finish_keys(ProgramBuilder& b, const Pair& kv, const AP& w, bool smallest_first) {
  // 1 where the element is a number.
  b.emit(kVector, isa::tensor_scalar(w, kv.s, smallest_first ? AluOp::kIsLt : AluOp::kIsGe,
                                     isa::imm(kNanFlag)));
  if (!smallest_first)
    b.emit(kVector, isa::tensor_scalar(kv.k, kv.k, AluOp::kMultiply, isa::imm(-1.0f)));
  b.emit(kVector, isa::select(kv.k, w, kv.k, std::numeric_limits<float>::quiet_NaN()));
  b.emit(kVector, isa::tensor_scalar(kv.s, kv.s, AluOp::kMod, isa::imm(kNanFlag)));
}

// Loads `g` rows starting at row r0 into a [128, g, pitch] tile at `off`: row element e at
// partition e / C, free e % C (the last partition partial, later ones untouched).
void load_rows(ProgramBuilder& b, StreamId q, const TensorDesc& in, const RowView& x, int64_t r0,
               uint32_t g, uint32_t C, uint32_t pitch, uint64_t off) {
  const uint32_t n = static_cast<uint32_t>(x.n), full = n / C, tail = n % C;
  if (full > 0)
    b.emit(q, isa::dma_copy(sb(0, full, off, {{pitch, g}, {1, C}}),
                            hbm_ap(in, r0 * x.row_stride, full, int64_t{C} * x.stride,
                                   {{x.row_stride, g}, {x.stride, C}})));
  if (tail > 0)
    b.emit(q, isa::dma_copy(sb(full, 1, off, {{pitch, g}, {1, tail}}),
                            hbm_ap(in, r0 * x.row_stride + int64_t{full} * C * x.stride, 1, 0,
                                   {{x.row_stride, g}, {x.stride, tail}})));
}

void check_long(const RowView& x, const char* what) {
  if (x.n > kMaxLongLength)
    throw std::invalid_argument(
        fmt::format("{}: {} elements per row exceed {}", what, x.n, kMaxLongLength));
}

// The fp32 elements per partition each of two PSUM masks gets from `banks` banks.
uint64_t psum_mask_floats(const CoreParams& core, uint32_t banks) {
  return std::min<uint64_t>(banks / 2 * core.psum.bank_bytes() / 4,
                            core.vector.max_free_elements_psum);
}

// PSUM banks the sort's transposes use (the others hold masks).
uint32_t sort_transpose_banks(const CoreParams& core) {
  return std::max<uint32_t>(1, core.psum.banks / 2);
}

// The topk plan: C elements of a row per partition, in a chunk of Cp = 2^m slots; K candidate
// slots (k rounded up to a power of two); G rows per tile. Stage 1 picks each chunk's
// candidates by rounds (few candidates) or by sorting blocks of min(K, Cp) and merging them
// down to one list of K (bitonic).
struct TopkPlan {
  uint32_t C = 0, Cp = 0, k1 = 0, K = 0, G = 0;
  bool rounds = false;
};

TopkPlan topk_plan(int64_t n, int64_t k, int64_t rows, const CoreParams& core) {
  TopkPlan p;
  const uint32_t P = core.sbuf.partitions;
  p.C = static_cast<uint32_t>((n + P - 1) / P);
  p.Cp = ceil_pow2(p.C);
  p.k1 = static_cast<uint32_t>(std::min<int64_t>(k, p.C));
  p.K = ceil_pow2(static_cast<uint64_t>(k));
  p.rounds = p.k1 <= 4;
  // Per row: two key/sec chunk buffers and a scratch chunk; candidates (two buffers), the
  // partner lists and three masks of K slots (chunk-pair sized for stage 1's network). Shared:
  // the element indices, the valid mask, the pair indices and the direction mask.
  const uint64_t per_row = 20ull * p.Cp + 24ull * p.K + 12ull * std::max(p.K, p.Cp / 2);
  const uint64_t shared = 16ull * p.Cp + kAlignSlack;
  const uint64_t budget = core.sbuf.partition_bytes;
  p.G = per_row + shared > budget ? 0
                                  : static_cast<uint32_t>(std::min<uint64_t>(
                                        {(budget - shared) / per_row, kLongRowGroup,
                                         static_cast<uint64_t>(std::max<int64_t>(rows, 1))}));
  // One instruction's free size is bounded.
  while (p.G > 1 && uint64_t{p.G} * std::max(p.Cp, p.K) > core.vector.max_free_elements_sbuf) --p.G;
  // Rows whose masks fit PSUM (Masks): no more rows per tile than keep them there.
  const uint64_t g_psum = psum_mask_floats(core, core.psum.banks) / std::max(p.K, p.Cp / 2);
  if (g_psum >= 1) p.G = static_cast<uint32_t>(std::min<uint64_t>(p.G, g_psum));
  return p;
}

// The sort plan: N = 128 F elements per row, transposes of E x E blocks, g rows per tile.
struct SortPlan {
  uint32_t N = 0, F = 0, E = 0, TF = 0, G = 0;
};

SortPlan sort_plan(int64_t n, int64_t rows, const CoreParams& core) {
  SortPlan p;
  const uint32_t P = core.sbuf.partitions;
  p.N = std::max<uint32_t>(ceil_pow2(static_cast<uint64_t>(n)), 2 * P);
  p.F = p.N / P;
  p.E = std::min(p.F, P);
  p.TF = p.F * P / p.E;
  // Per row: two key/sec buffers in each layout and three masks. Shared: indices and
  // direction masks.
  const uint64_t per_row = 16ull * p.F + 16ull * p.TF + 6ull * std::max(p.F, p.TF);
  const uint64_t shared = 12ull * p.F + 4ull * p.TF + kAlignSlack;
  const uint64_t budget = core.sbuf.partition_bytes;
  p.G = per_row + shared > budget ? 0
                                  : static_cast<uint32_t>(std::min<uint64_t>(
                                        {(budget - shared) / per_row, kLongRowGroup,
                                         static_cast<uint64_t>(std::max<int64_t>(rows, 1))}));
  while (p.G > 1 && uint64_t{p.G} * p.TF > core.vector.max_free_elements_sbuf) --p.G;
  const uint64_t g_psum = psum_mask_floats(core, core.psum.banks - sort_transpose_banks(core)) /
                          (std::max(p.F, p.TF) / 2);
  if (g_psum >= 1) p.G = static_cast<uint32_t>(std::min<uint64_t>(p.G, g_psum));
  return p;
}

}  // namespace

bool long_topk_fits(int64_t n, int64_t k, const CoreParams& core) {
  return n >= 1 && n <= kMaxLongLength && k >= 0 && k <= n && k <= kMaxLongTopk &&
         topk_plan(n, k, 1, core).G > 0;
}

// Per instruction: its elements (fp32 tensor_tensor and select take 2 cycles per element,
// tensor_scalar and tensor_reduce 1) or the minimum initiation interval, plus the pipeline
// latency of the dependent chain: build_topk's round is select, reduce, tensor_scalar,
// tensor_tensor, select, reduce, tensor_scalar, tensor_tensor.
double short_topk_cycles(int64_t rows, int64_t n, int64_t k, const CoreParams& core) {
  double round = 0;
  for (double per_elem : {2, 1, 1, 2, 2, 1, 1, 2})
    round += std::max<double>(per_elem * static_cast<double>(n), core.vector.min_ii_cycles) +
             core.vector.pipeline_latency_cycles;
  const int64_t tiles = (rows + core.sbuf.partitions - 1) / core.sbuf.partitions;
  return static_cast<double>(tiles) * static_cast<double>(k) * round;
}

// The compare-exchange stages' instructions, with the masks in PSUM (Masks): three compares at 2
// cycles per element, the selects (and the direction XOR) at 1.
struct StageCost {
  double lat, ii, G;
  double at(double per_elem, double elems) const {
    return std::max(per_elem * G * elems, ii) + lat;
  }
  double exchange(double pairs, bool dir) const {
    return 3 * at(2, pairs) + (dir ? 6 : 5) * at(1, pairs);
  }
  double min_step(double pairs) const { return 3 * at(2, pairs) + 3 * at(1, pairs); }
};

double long_topk_cycles(int64_t rows, int64_t n, int64_t k, const CoreParams& core) {
  const TopkPlan p = topk_plan(n, k, rows, core);
  if (p.G == 0) return std::numeric_limits<double>::infinity();
  const StageCost c{static_cast<double>(core.vector.pipeline_latency_cycles),
                    static_cast<double>(core.vector.min_ii_cycles), static_cast<double>(p.G)};
  double stage1 = 0;
  if (p.rounds) {
    stage1 = p.k1 * (2 * c.at(1, p.Cp) + 5 * c.at(2, p.Cp));
  } else {
    const uint32_t lb = log2u(std::min(p.K, p.Cp));
    stage1 = lb * (lb + 1) / 2.0 * c.exchange(p.Cp / 2.0, true);
    for (uint32_t size = p.Cp; size > p.K; size /= 2)
      stage1 += c.min_step(size / 2.0) + log2u(p.K) * c.exchange(size / 4.0, false);
  }
  const double level = c.min_step(p.K) + log2u(p.K) * c.exchange(p.K / 2.0, false) +
                       core.vector.frequency_hz * core.dma.launch_latency_ns * 1e-9;  // DMA launch
  const int64_t groups = (rows + p.G - 1) / p.G;
  return static_cast<double>(groups) * (stage1 + 7.0 * level);
}

double long_sort_cycles(int64_t rows, int64_t n, const CoreParams& core) {
  const SortPlan p = sort_plan(n, rows, core);
  if (p.G == 0) return std::numeric_limits<double>::infinity();
  const StageCost c{static_cast<double>(core.vector.pipeline_latency_cycles),
                    static_cast<double>(core.vector.min_ii_cycles), static_cast<double>(p.G)};
  const uint32_t L = log2u(p.N), lf = log2u(p.F);
  double cycles = L * (L + 1) / 2.0 * c.exchange(p.F / 2.0, true);
  // Phases with partition stages: there and back, keys and secs, one PSUM copy per bank of
  // transposed blocks (each after a TensorE round trip, ~2 pipeline latencies).
  const double bank = static_cast<double>(core.psum.bank_bytes() / 4);
  const double copies = 2.0 * p.G * (std::ceil(p.TF / bank) + std::ceil(p.F / bank));
  cycles += (L - lf) * copies * (std::max<double>(p.F, c.ii) + 3.0 * c.lat);
  const int64_t groups = (rows + p.G - 1) / p.G;
  return static_cast<double>(groups) * cycles;
}

int64_t max_long_sort_length(const CoreParams& core) {
  int64_t n = 2 * core.sbuf.partitions;
  while (n * 2 <= kMaxLongLength && sort_plan(n * 2, 1, core).G > 0) n *= 2;
  return n;
}

Program build_topk_long(const std::string& name, const TensorDesc& in, const TensorDesc& values,
                        const TensorDesc& indices, int64_t dim, int64_t k, bool largest,
                        const CoreParams& core) {
  const RowView x = view_of(in, dim, "topk");
  const RowView vo = view_of(values, dim, "topk"), io = view_of(indices, dim, "topk");
  if (k < 0 || k > x.n) throw std::invalid_argument(fmt::format("topk: k = {} of {}", k, x.n));
  check_long(x, "topk");
  if (k > kMaxLongTopk)
    throw std::invalid_argument(
        fmt::format("topk: k = {} exceeds the long-row kernel's {}", k, kMaxLongTopk));
  ProgramBuilder b(name, core);
  if (x.rows == 0 || k == 0) return std::move(b).build();
  const TopkPlan plan = topk_plan(x.n, k, x.rows, core);
  if (plan.G == 0)
    throw std::invalid_argument(
        fmt::format("topk: rows of {} with k = {} do not fit SBUF", x.n, k));
  const uint32_t P = core.sbuf.partitions, C = plan.C, Cp = plan.Cp, K = plan.K, G = plan.G;
  const uint32_t kk = static_cast<uint32_t>(k);
  const bool smallest_first = !largest;
  const uint32_t used = static_cast<uint32_t>((x.n + C - 1) / C);  // partitions holding elements
  const uint64_t e_off = b.alloc_sbuf(uint64_t{Cp} * 4), valid_off = b.alloc_sbuf(uint64_t{Cp} * 4),
                 q_off = b.alloc_sbuf(uint64_t{Cp} * 2), dir_off = b.alloc_sbuf(uint64_t{Cp} * 2),
                 w_off = b.alloc_sbuf(uint64_t{G} * Cp * 4);
  uint64_t xk[2], xs[2], ck[2], cs[2];
  for (int i = 0; i < 2; ++i) {
    xk[i] = b.alloc_sbuf(uint64_t{G} * Cp * 4);
    xs[i] = b.alloc_sbuf(uint64_t{G} * Cp * 4);
    ck[i] = b.alloc_sbuf(uint64_t{G} * K * 4);
    cs[i] = b.alloc_sbuf(uint64_t{G} * K * 4);
  }
  const uint64_t bk = b.alloc_sbuf(uint64_t{G} * K * 4), bs = b.alloc_sbuf(uint64_t{G} * K * 4);
  const Masks masks = alloc_masks(b, uint64_t{G} * std::max(K, Cp / 2), core.psum.banks, core);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qk = dma_queue(2), qs = dma_queue(3);

  // e = p C + f over the chunk's Cp slots; slots f >= C and elements e >= n are padding.
  b.emit(kGpSimd, isa::iota(sb(0, P, e_off, {{1, Cp}}), 0, static_cast<int32_t>(C), {1}));
  b.emit(kGpSimd, isa::iota(sb(0, P, valid_off, {{1, Cp}}), 0, 0, {1}));
  if (Cp > 1)
    b.emit(kGpSimd, isa::iota(isa::sbuf(DType::kInt32, 0, P, q_off, {{1, Cp / 2}}), 0, 0, {1}));
  b.wait(kVector, b.mark(kGpSimd));
  {
    const AP valid = sb(0, P, valid_off, {{1, Cp}}), tmp = sb(0, P, w_off, {{1, Cp}});
    b.emit(kVector, isa::tensor_scalar(valid, valid, AluOp::kIsLt, isa::imm(float(C))));
    b.emit(kVector, isa::tensor_scalar(tmp, sb(0, P, e_off, {{1, Cp}}), AluOp::kIsLt,
                                       isa::imm(static_cast<float>(x.n))));
    b.emit(kVector, isa::tensor_tensor(valid, valid, tmp, AluOp::kLogicalAnd));
  }
  ProgramBuilder::Token tile_free, out_free;
  for (int64_t r0 = 0; r0 < x.rows; r0 += G) {
    const uint32_t g = static_cast<uint32_t>(std::min<int64_t>(G, x.rows - r0));
    b.wait(qin, tile_free);
    load_rows(b, qin, in, x, r0, g, C, Cp, xk[0]);
    b.wait(kVector, b.mark(qin));
    const Pair kv{sb(0, P, xk[0], {{Cp, g}, {1, Cp}}), sb(0, P, xs[0], {{Cp, g}, {1, Cp}})};
    const AP w = sb(0, P, w_off, {{Cp, g}, {1, Cp}});
    make_keys(b, kv, sb(0, P, e_off, {{0, g}, {1, Cp}}), sb(0, P, valid_off, {{0, g}, {1, Cp}}), w,
              smallest_first);
    // The previous tile's results have left before the candidates are rewritten.
    b.wait(kVector, out_free);
    // Stage 1: each partition's smallest pairs, in order, into candidate slots ck[0], cs[0].
    if (plan.rounds) {
      // k1 rounds: the smallest key, the smallest sec holding it, that element removed.
      for (uint32_t j = 0; j < plan.k1; ++j) {
        const AP cj_k = sb(0, P, ck[0] + j * 4, {{K, g}}), cj_s = sb(0, P, cs[0] + j * 4, {{K, g}});
        const AP bj_k = sb(0, P, ck[0] + j * 4, {{K, g}, {0, Cp}}),
                 bj_s = sb(0, P, cs[0] + j * 4, {{K, g}, {0, Cp}});
        b.emit(kVector, isa::tensor_reduce(cj_k, kv.k, ReduceOp::kMin));
        b.emit(kVector, isa::tensor_tensor(w, kv.k, bj_k, AluOp::kIsEqual));
        b.emit(kVector, isa::select(w, w, kv.s, kGone));
        b.emit(kVector, isa::tensor_reduce(cj_s, w, ReduceOp::kMin));
        b.emit(kVector, isa::tensor_tensor(w, kv.s, bj_s, AluOp::kNotEqual));
        b.emit(kVector, isa::select(kv.k, w, kv.k, kInf));
        b.emit(kVector, isa::select(kv.s, w, kv.s, kGone));
      }
      if (plan.k1 < K) {
        b.emit(kVector,
               isa::memset(sb(0, P, ck[0] + plan.k1 * 4, {{K, g}, {1, K - plan.k1}}), kInf));
        b.emit(kVector,
               isa::memset(sb(0, P, cs[0] + plan.k1 * 4, {{K, g}, {1, K - plan.k1}}), kGone));
      }
    } else {
      // Bitonic: sort blocks of B = min(K, Cp) slots ascending (blocks alternate direction
      // until the last phase), then merge pairs of sorted blocks into the K smallest of each
      // pair until one list of K remains.
      const uint32_t B = std::min(K, Cp);
      int cur = 0;
      for (uint32_t ph = 1; ph <= log2u(B); ++ph) {
        // Direction: bit ph of the slot until the last phase, which sorts every block ascending.
        const AP dir = isa::sbuf(DType::kInt32, 0, P, dir_off, {{0, g}, {1, Cp / 2}});
        const bool dir_needed = ph < log2u(B);
        if (dir_needed)
          b.emit(kVector, isa::tensor_scalar(isa::sbuf(DType::kInt32, 0, P, dir_off, {{1, Cp / 2}}),
                                             isa::sbuf(DType::kInt32, 0, P, q_off, {{1, Cp / 2}}),
                                             AluOp::kShiftRight, isa::imm(float(ph - 1)),
                                             AluOp::kBitwiseAnd, isa::imm(1.0f)));
        for (int64_t t = ph - 1; t >= 0; --t) {
          const uint32_t d = 1u << t, blocks = Cp / (2 * d);
          auto side = [&](int buf, uint32_t shift) {
            return Pair{sb(0, P, xk[buf] + shift * 4, {{Cp, g}, {2 * d, blocks}, {1, d}}),
                        sb(0, P, xs[buf] + shift * 4, {{Cp, g}, {2 * d, blocks}, {1, d}})};
          };
          AP mk[3];
          masks.get(P, g * Cp / 2, mk);
          compare_exchange(b, side(cur, 0), side(cur, d), side(1 - cur, 0), side(1 - cur, d), mk,
                           dir_needed ? &dir : nullptr);
          cur = 1 - cur;
        }
      }
      // Merge levels: `nb` sorted blocks of B per row, compact at the chunk's start.
      for (uint32_t nb = Cp / B; nb > 1; nb /= 2) {
        const uint32_t h = nb / 2;
        // Block 2j and block 2j + 1 reversed: the elementwise smaller holds the K smallest of
        // the pair as a bitonic sequence, written compactly as block j of the other buffer.
        const Pair ev{sb(0, P, xk[cur], {{Cp, g}, {2 * B, h}, {1, B}}),
                      sb(0, P, xs[cur], {{Cp, g}, {2 * B, h}, {1, B}})};
        const Pair od{sb(0, P, xk[cur] + (2 * B - 1) * 4, {{Cp, g}, {2 * B, h}, {-1, B}}),
                      sb(0, P, xs[cur] + (2 * B - 1) * 4, {{Cp, g}, {2 * B, h}, {-1, B}})};
        const Pair out{sb(0, P, xk[1 - cur], {{Cp, g}, {B, h}, {1, B}}),
                       sb(0, P, xs[1 - cur], {{Cp, g}, {B, h}, {1, B}})};
        AP mk[3];
        masks.get(P, g * h * B, mk);
        lex_greater(b, ev, od, mk[0], mk[1], mk[2]);
        b.emit(kVector, isa::select(out.k, mk[0], od.k, ev.k));
        b.emit(kVector, isa::select(out.s, mk[0], od.s, ev.s));
        cur = 1 - cur;
        for (uint32_t t = log2u(B); t-- > 0;) {
          const uint32_t d = 1u << t, blocks = h * B / (2 * d);
          auto side = [&](int buf, uint32_t shift) {
            return Pair{sb(0, P, xk[buf] + shift * 4, {{Cp, g}, {2 * d, blocks}, {1, d}}),
                        sb(0, P, xs[buf] + shift * 4, {{Cp, g}, {2 * d, blocks}, {1, d}})};
          };
          AP mh[3];
          masks.get(P, g * h * B / 2, mh);
          compare_exchange(b, side(cur, 0), side(cur, d), side(1 - cur, 0), side(1 - cur, d), mh,
                           nullptr);
          cur = 1 - cur;
        }
      }
      // The chunk's sorted list (B slots) into the candidates, empty slots after it.
      b.emit(kVector, isa::tensor_copy(sb(0, P, ck[0], {{K, g}, {1, B}}),
                                       sb(0, P, xk[cur], {{Cp, g}, {1, B}})));
      b.emit(kVector, isa::tensor_copy(sb(0, P, cs[0], {{K, g}, {1, B}}),
                                       sb(0, P, xs[cur], {{Cp, g}, {1, B}})));
      if (B < K) {
        b.emit(kVector, isa::memset(sb(0, P, ck[0] + B * 4, {{K, g}, {1, K - B}}), kInf));
        b.emit(kVector, isa::memset(sb(0, P, cs[0] + B * 4, {{K, g}, {1, K - B}}), kGone));
      }
    }
    tile_free = b.mark(kVector);
    // Stage 2: merge the sorted lists of partitions [H, A) into [0, H), halving A.
    int cur = 0;
    for (uint32_t A = ceil_pow2(used); A > 1; A /= 2) {
      const uint32_t H = A / 2;
      const ProgramBuilder::Token lists = b.mark(kVector);
      b.wait(qk, lists);
      b.wait(qs, lists);
      b.emit(qk, isa::dma_copy(sb(0, H, bk, {{K, g}, {1, K}}),
                               sb(H, H, ck[cur] + (K - 1) * 4, {{K, g}, {-1, K}})));
      b.emit(qs, isa::dma_copy(sb(0, H, bs, {{K, g}, {1, K}}),
                               sb(H, H, cs[cur] + (K - 1) * 4, {{K, g}, {-1, K}})));
      b.wait(kVector, b.mark(qk));
      b.wait(kVector, b.mark(qs));
      const Pair a{sb(0, H, ck[cur], {{K, g}, {1, K}}), sb(0, H, cs[cur], {{K, g}, {1, K}})};
      const Pair other{sb(0, H, bk, {{K, g}, {1, K}}), sb(0, H, bs, {{K, g}, {1, K}})};
      AP mk[3];
      masks.get(H, g * K, mk);
      // The K smallest of the two lists, as a bitonic sequence.
      lex_greater(b, a, other, mk[0], mk[1], mk[2]);
      b.emit(kVector, isa::select(a.k, mk[0], other.k, a.k));
      b.emit(kVector, isa::select(a.s, mk[0], other.s, a.s));
      // Half-cleaners sort it ascending.
      for (uint32_t t = log2u(K); t-- > 0;) {
        const uint32_t d = 1u << t, blocks = K / (2 * d);
        auto side = [&](int buf, uint32_t shift) {
          return Pair{sb(0, H, ck[buf] + shift * 4, {{K, g}, {2 * d, blocks}, {1, d}}),
                      sb(0, H, cs[buf] + shift * 4, {{K, g}, {2 * d, blocks}, {1, d}})};
        };
        AP mh[3];
        masks.get(H, g * K / 2, mh);
        compare_exchange(b, side(cur, 0), side(cur, d), side(1 - cur, 0), side(1 - cur, d), mh,
                         nullptr);
        cur = 1 - cur;
      }
    }
    // Partition 0 holds each row's K smallest pairs in order.
    const Pair res{sb(0, 1, ck[cur], {{1, g * K}}), sb(0, 1, cs[cur], {{1, g * K}})};
    finish_keys(b, res, masks.at(2, 1, g * K), smallest_first);
    b.wait(qout, b.mark(kVector));
    b.emit(qout,
           isa::dma_copy(hbm_ap(values, r0 * vo.row_stride, g, vo.row_stride, {{vo.stride, kk}}),
                         sb(0, 1, ck[cur], {{K, g}, {1, kk}})));
    b.emit(qout,
           isa::dma_copy(hbm_ap(indices, r0 * io.row_stride, g, io.row_stride, {{io.stride, kk}}),
                         sb(0, 1, cs[cur], {{K, g}, {1, kk}})));
    out_free = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_sort_long(const std::string& name, const TensorDesc& in, const TensorDesc& values,
                        const TensorDesc& indices, int64_t dim, bool descending,
                        const CoreParams& core) {
  const RowView x = view_of(in, dim, "sort");
  const RowView vo = view_of(values, dim, "sort"), io = view_of(indices, dim, "sort");
  check_long(x, "sort");
  if (x.n > max_long_sort_length(core))
    throw std::invalid_argument(
        fmt::format("sort: {} elements per row exceed {}", x.n, max_long_sort_length(core)));
  ProgramBuilder b(name, core);
  if (x.rows == 0 || x.n == 0) return std::move(b).build();
  const SortPlan plan = sort_plan(x.n, x.rows, core);
  const uint32_t P = core.sbuf.partitions, F = plan.F, E = plan.E, TF = plan.TF, G = plan.G;
  const uint32_t N = plan.N, L = log2u(N), lf = log2u(F), n = static_cast<uint32_t>(x.n);
  const bool smallest_first = !descending;
  const uint64_t e_off = b.alloc_sbuf(uint64_t{F} * 4), valid_off = b.alloc_sbuf(uint64_t{F} * 4),
                 q_off = b.alloc_sbuf(uint64_t{F} * 2), qt_off = b.alloc_sbuf(uint64_t{TF} * 2),
                 dir_off = b.alloc_sbuf(uint64_t{F} * 2), dirt_off = b.alloc_sbuf(uint64_t{TF} * 2);
  uint64_t ok[2], os[2], tk[2], ts[2];
  for (int i = 0; i < 2; ++i) {
    ok[i] = b.alloc_sbuf(uint64_t{G} * F * 4);
    os[i] = b.alloc_sbuf(uint64_t{G} * F * 4);
    tk[i] = b.alloc_sbuf(uint64_t{G} * TF * 4);
    ts[i] = b.alloc_sbuf(uint64_t{G} * TF * 4);
  }
  // Half the PSUM banks for the transposes, the other half for the masks.
  const uint32_t banks = sort_transpose_banks(core);
  const Masks masks =
      alloc_masks(b, uint64_t{G} * std::max(F, TF) / 2, core.psum.banks - banks, core);
  std::vector<uint64_t> psum(banks);
  for (auto& p : psum) p = b.alloc_psum_bank();
  const uint32_t bank_floats = static_cast<uint32_t>(core.psum.bank_bytes() / 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);

  // e = p F + f (fp32); pair indices p F/2 + q (direction masks in the row layout) and q (in
  // the transposed layout), int32.
  b.emit(kGpSimd, isa::iota(sb(0, P, e_off, {{1, F}}), 0, static_cast<int32_t>(F), {1}));
  b.emit(kGpSimd, isa::iota(isa::sbuf(DType::kInt32, 0, P, q_off, {{1, F / 2}}), 0,
                            static_cast<int32_t>(F / 2), {1}));
  b.emit(kGpSimd, isa::iota(isa::sbuf(DType::kInt32, 0, E, qt_off, {{1, TF / 2}}), 0, 0, {1}));
  b.wait(kVector, b.mark(kGpSimd));
  b.emit(kVector, isa::tensor_scalar(sb(0, P, valid_off, {{1, F}}), sb(0, P, e_off, {{1, F}}),
                                     AluOp::kIsLt, isa::imm(static_cast<float>(n))));

  // Moves `g` rows between layouts through TensorE: row layout [P, g, F] (block j of E
  // columns) <-> transposed [E, g, TF] (block j of P columns).
  auto transpose_all = [&](uint32_t g, bool to_t, uint64_t src_k, uint64_t src_s, uint64_t dst_k,
                           uint64_t dst_s) {
    const uint32_t blocks = F / E;
    const uint32_t out_parts = to_t ? E : P, in_parts = to_t ? P : E;
    const uint32_t in_cols = to_t ? E : P, out_cols = to_t ? P : E;
    const uint32_t per_bank = std::max<uint32_t>(1, bank_floats / out_cols);
    uint32_t bank = 0;
    ProgramBuilder::Token copied;
    for (int a = 0; a < 2; ++a) {
      const uint64_t src = a == 0 ? src_k : src_s, dst = a == 0 ? dst_k : dst_s;
      const uint32_t src_row = to_t ? F : TF, dst_row = to_t ? TF : F;
      for (uint32_t r = 0; r < g; ++r) {
        for (uint32_t j0 = 0; j0 < blocks; j0 += per_bank) {
          const uint32_t nb = std::min(per_bank, blocks - j0);
          if (bank == banks) {  // every bank in use: wait for their copies
            b.wait(kTensor, copied);
            bank = 0;
          }
          for (uint32_t j = j0; j < j0 + nb; ++j) {
            b.emit(kTensor,
                   isa::transpose(isa::psum_tile(DType::kFp32, out_parts,
                                                 psum[bank] + (j - j0) * out_cols * 4, out_cols),
                                  sb(0, in_parts, src + (uint64_t{r} * src_row + j * in_cols) * 4,
                                     {{1, in_cols}})));
          }
          b.wait(kVector, b.mark(kTensor));
          b.emit(kVector, isa::tensor_copy(
                              sb(0, out_parts, dst + (uint64_t{r} * dst_row + j0 * out_cols) * 4,
                                 {{1, nb * out_cols}}),
                              isa::psum_tile(DType::kFp32, out_parts, psum[bank], nb * out_cols)));
          copied = b.mark(kVector);
          ++bank;
        }
      }
    }
    b.wait(kTensor, copied);
  };

  ProgramBuilder::Token tile_free;
  for (int64_t r0 = 0; r0 < x.rows; r0 += G) {
    const uint32_t g = static_cast<uint32_t>(std::min<int64_t>(G, x.rows - r0));
    b.wait(qin, tile_free);
    load_rows(b, qin, in, x, r0, g, F, F, ok[0]);
    b.wait(kVector, b.mark(qin));
    make_keys(b, {sb(0, P, ok[0], {{F, g}, {1, F}}), sb(0, P, os[0], {{F, g}, {1, F}})},
              sb(0, P, e_off, {{0, g}, {1, F}}), sb(0, P, valid_off, {{0, g}, {1, F}}),
              sb(0, P, ok[1], {{F, g}, {1, F}}), smallest_first);
    int cur = 0;
    for (uint32_t s = 1; s <= L; ++s) {
      int64_t t = s - 1;
      if (t >= lf) {
        // Partners on other partitions: those stages run over the transposed layout, where the
        // partition bits of e are the low free bits.
        b.wait(kTensor, b.mark(kVector));
        transpose_all(g, true, ok[cur], os[cur], tk[0], ts[0]);
        const AP dir = isa::sbuf(DType::kInt32, 0, E, dirt_off, {{0, g}, {1, TF / 2}});
        if (s < L)
          b.emit(kVector,
                 isa::tensor_scalar(isa::sbuf(DType::kInt32, 0, E, dirt_off, {{1, TF / 2}}),
                                    isa::sbuf(DType::kInt32, 0, E, qt_off, {{1, TF / 2}}),
                                    AluOp::kShiftRight, isa::imm(float(s - lf - 1)),
                                    AluOp::kBitwiseAnd, isa::imm(1.0f)));
        int tc = 0;
        for (; t >= lf; --t) {
          const uint32_t d = 1u << (t - lf), blocks = TF / (2 * d);
          auto side = [&](int buf, uint32_t shift) {
            return Pair{sb(0, E, tk[buf] + shift * 4, {{TF, g}, {2 * d, blocks}, {1, d}}),
                        sb(0, E, ts[buf] + shift * 4, {{TF, g}, {2 * d, blocks}, {1, d}})};
          };
          AP mk[3];
          masks.get(E, g * TF / 2, mk);
          compare_exchange(b, side(tc, 0), side(tc, d), side(1 - tc, 0), side(1 - tc, d), mk,
                           s < L ? &dir : nullptr);
          tc = 1 - tc;
        }
        b.wait(kTensor, b.mark(kVector));
        transpose_all(g, false, tk[tc], ts[tc], ok[cur], os[cur]);
      }
      // In-partition stages.
      const AP dir = isa::sbuf(DType::kInt32, 0, P, dir_off, {{0, g}, {1, F / 2}});
      if (s < L)
        b.emit(kVector, isa::tensor_scalar(isa::sbuf(DType::kInt32, 0, P, dir_off, {{1, F / 2}}),
                                           isa::sbuf(DType::kInt32, 0, P, q_off, {{1, F / 2}}),
                                           AluOp::kShiftRight, isa::imm(float(s - 1)),
                                           AluOp::kBitwiseAnd, isa::imm(1.0f)));
      for (; t >= 0; --t) {
        const uint32_t d = 1u << t, blocks = F / (2 * d);
        auto side = [&](int buf, uint32_t shift) {
          return Pair{sb(0, P, ok[buf] + shift * 4, {{F, g}, {2 * d, blocks}, {1, d}}),
                      sb(0, P, os[buf] + shift * 4, {{F, g}, {2 * d, blocks}, {1, d}})};
        };
        AP mk[3];
        masks.get(P, g * F / 2, mk);
        compare_exchange(b, side(cur, 0), side(cur, d), side(1 - cur, 0), side(1 - cur, d), mk,
                         s < L ? &dir : nullptr);
        cur = 1 - cur;
      }
    }
    const Pair res{sb(0, P, ok[cur], {{1, g * F}}), sb(0, P, os[cur], {{1, g * F}})};
    finish_keys(b, res, sb(0, P, ok[1 - cur], {{1, g * F}}), smallest_first);
    const ProgramBuilder::Token done = b.mark(kVector);
    b.wait(qout, done);
    const uint32_t full = n / F, tail = n % F;
    for (int a = 0; a < 2; ++a) {
      const TensorDesc& out = a == 0 ? values : indices;
      const RowView& o = a == 0 ? vo : io;
      const uint64_t src = a == 0 ? ok[cur] : os[cur];
      if (full > 0)
        b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * o.row_stride, full, int64_t{F} * o.stride,
                                          {{o.row_stride, g}, {o.stride, F}}),
                                   sb(0, full, src, {{F, g}, {1, F}})));
      if (tail > 0)
        b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * o.row_stride + int64_t{full} * F * o.stride, 1,
                                          0, {{o.row_stride, g}, {o.stride, tail}}),
                                   sb(full, 1, src, {{F, g}, {1, tail}})));
    }
    // The next tile's load and stages wait for this tile's results to leave.
    tile_free = b.mark(qout);
    b.wait(kVector, tile_free);
  }
  return std::move(b).build();
}

int64_t max_long_scan_length(const CoreParams& core) {
  // Two chunk buffers of C fp32 per row and partition, beside the small carry buffers.
  const uint64_t P = core.sbuf.partitions, budget = core.sbuf.partition_bytes - 4096 - 8 * P;
  const uint64_t C = std::min<uint64_t>((budget - 8) / 8, core.vector.max_free_elements_sbuf);
  return std::min<int64_t>(kMaxLongLength, static_cast<int64_t>(C * P));
}

Program build_scan_long(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                        int64_t dim, bool product, const CoreParams& core) {
  const RowView x = view_of(in, dim, "scan"), o = view_of(out, dim, "scan");
  if (!is_float(in.dtype) || !is_float(out.dtype))
    throw std::invalid_argument(
        fmt::format("scan: the long-row scan takes float data, got {} -> {}", dtype_name(in.dtype),
                    dtype_name(out.dtype)));
  if (x.n > max_long_scan_length(core))
    throw std::invalid_argument(
        fmt::format("scan: {} elements per row exceed {}", x.n, max_long_scan_length(core)));
  ProgramBuilder b(name, core);
  if (x.rows == 0 || x.n == 0) return std::move(b).build();
  const uint32_t P = core.sbuf.partitions;
  const uint32_t C = static_cast<uint32_t>((x.n + P - 1) / P), n = static_cast<uint32_t>(x.n);
  const uint32_t budget_rows =
      static_cast<uint32_t>((core.sbuf.partition_bytes - 4096 - 8ull * P) / (8ull * C + 8));
  const uint32_t G = static_cast<uint32_t>(std::min<uint64_t>(
      {std::max<uint32_t>(budget_rows, 1), kLongRowGroup, static_cast<uint64_t>(x.rows),
       std::max<uint64_t>(1, core.vector.max_free_elements_sbuf / C)}));
  const AluOp op = product ? AluOp::kMultiply : AluOp::kAdd;
  const float identity = product ? 1.0f : 0.0f;
  uint64_t buf[2];
  for (auto& a : buf) a = b.alloc_sbuf(uint64_t{G} * C * 4);
  // Chunk totals [P, g] and their transposes [g, P] (two buffers for the scan over partitions).
  const uint64_t tot = b.alloc_sbuf(uint64_t{G} * 4), offs = b.alloc_sbuf(uint64_t{G} * 4),
                 tr[2] = {b.alloc_sbuf(uint64_t{P} * 4), b.alloc_sbuf(uint64_t{P} * 4)};
  const uint64_t ps_t = b.alloc_psum_bank(), ps_o = b.alloc_psum_bank();
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  ProgramBuilder::Token tile_free;
  for (int64_t r0 = 0; r0 < x.rows; r0 += G) {
    const uint32_t g = static_cast<uint32_t>(std::min<int64_t>(G, x.rows - r0));
    b.wait(qin, tile_free);
    load_rows(b, qin, in, x, r0, g, C, C, buf[0]);
    b.wait(kVector, b.mark(qin));
    // Inclusive scan of each partition's chunk: Hillis-Steele, x[j] op= x[j - d] for d = 1, 2,
    // 4, ... (the elements before d copied), between two buffers.
    int cur = 0;
    for (uint32_t d = 1; d < C; d *= 2) {
      const uint64_t src = buf[cur], dst = buf[1 - cur];
      b.emit(kVector, isa::tensor_tensor(sb(0, P, dst + d * 4, {{C, g}, {1, C - d}}),
                                         sb(0, P, src + d * 4, {{C, g}, {1, C - d}}),
                                         sb(0, P, src, {{C, g}, {1, C - d}}), op));
      b.emit(kVector,
             isa::tensor_copy(sb(0, P, dst, {{C, g}, {1, d}}), sb(0, P, src, {{C, g}, {1, d}})));
      cur = 1 - cur;
    }
    // Exclusive scan of the chunk totals over partitions: transposed to one row per tile row,
    // scanned along the free axis (identity first), transposed back.
    const uint64_t a = buf[cur];
    b.emit(kVector, isa::tensor_copy(sb(0, P, tot, {{1, g}}), sb(0, P, a + (C - 1) * 4, {{C, g}})));
    b.wait(kTensor, b.mark(kVector));
    b.emit(kTensor,
           isa::transpose(isa::psum_tile(DType::kFp32, g, ps_t, P), sb(0, P, tot, {{1, g}})));
    b.wait(kVector, b.mark(kTensor));
    // tr[0] = [identity, t0, t1, ..., t_{P-2}]: the scan of it is exclusive.
    b.emit(kVector, isa::memset(sb(0, g, tr[0], {{1, 1}}), identity));
    b.emit(kVector, isa::tensor_copy(sb(0, g, tr[0] + 4, {{1, P - 1}}),
                                     isa::psum_tile(DType::kFp32, g, ps_t, P - 1)));
    int tc = 0;
    for (uint32_t d = 1; d < P; d *= 2) {
      const uint64_t src = tr[tc], dst = tr[1 - tc];
      b.emit(kVector, isa::tensor_tensor(sb(0, g, dst + d * 4, {{1, P - d}}),
                                         sb(0, g, src + d * 4, {{1, P - d}}),
                                         sb(0, g, src, {{1, P - d}}), op));
      b.emit(kVector, isa::tensor_copy(sb(0, g, dst, {{1, d}}), sb(0, g, src, {{1, d}})));
      tc = 1 - tc;
    }
    b.wait(kTensor, b.mark(kVector));
    b.emit(kTensor,
           isa::transpose(isa::psum_tile(DType::kFp32, P, ps_o, g), sb(0, g, tr[tc], {{1, P}})));
    b.wait(kVector, b.mark(kTensor));
    b.emit(kVector,
           isa::tensor_copy(sb(0, P, offs, {{1, g}}), isa::psum_tile(DType::kFp32, P, ps_o, g)));
    b.emit(kVector, isa::tensor_tensor(sb(0, P, a, {{C, g}, {1, C}}), sb(0, P, a, {{C, g}, {1, C}}),
                                       sb(0, P, offs, {{1, g}, {0, C}}), op));
    b.wait(qout, b.mark(kVector));
    const uint32_t full = n / C, tail = n % C;
    if (full > 0)
      b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * o.row_stride, full, int64_t{C} * o.stride,
                                        {{o.row_stride, g}, {o.stride, C}}),
                                 sb(0, full, a, {{C, g}, {1, C}})));
    if (tail > 0)
      b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * o.row_stride + int64_t{full} * C * o.stride, 1, 0,
                                        {{o.row_stride, g}, {o.stride, tail}}),
                                 sb(full, 1, a, {{C, g}, {1, tail}})));
    tile_free = b.mark(qout);
    b.wait(kVector, tile_free);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
