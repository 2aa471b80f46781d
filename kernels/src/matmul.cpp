#include "neuronsim/kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "chunk_cache.h"
#include "matmul_plan.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// DMA queues by role. Stores and the bias have their own queues so no load waits behind them.
// K-major loads are issued in the order TensorE first reads them: the first group's pieces take
// turns on kPieceQueues (enough queues that one's descriptor processing hides behind the others'
// data), every later load takes turns on the first two or three kChunkQueues (see
// chunk_queues(): under the DMA's fair bandwidth sharing, loads in flight together land
// together instead of in the order needed).
constexpr uint8_t kPieceQueues[] = {0, 1, 2, 3};
constexpr uint8_t kChunkQueues[] = {0, 1, 2};
// Kernels the plan estimates longer than this take turns on three chunk queues, others on two.
constexpr double kLongKernelS = 50e-6;
constexpr uint8_t kStoreQueues[] = {4, 5, 6, 7, 9, 10, 11, 12};
constexpr uint8_t kBiasQueue = 8;
// Natural operands' loads (row stripes, transposed on TensorE) take turns on kLoadQueues: the
// first kFirstLoads on the first two, then all four (the others gated on the first two loads,
// whose launch latency they pay while these arrive).
constexpr uint8_t kLoadQueues[] = {0, 1, 2, 3};
constexpr uint32_t kFirstLoads = 6;
// Piece loads of one k-tile that TensorE reads in a row merge into one DMA (see piece_merge());
// the first kSoloPieces (the first stationary tile and moving piece) go alone, so the first
// matmul waits for as few bytes as possible.
constexpr size_t kSoloPieces = 2;
// Width of the moving pieces the first group loads B in and runs its first k-tile in.
constexpr uint32_t kLoadPiece = 128;
// How many matmul slots a tile's later contractions trail its first in the kernel's last steps.
constexpr size_t kTailSkew = 2;

// One operand of C = A @ B seen as K x J (J = M for A, N for B): element (k, j) of a batch slice
// sits at base + k * ks + j * js.
struct Operand {
  const TensorDesc* t = nullptr;
  DType dt = DType::kFp32;
  uint64_t es = 0;
  int64_t K = 0, J = 0, ks = 0, js = 0;
  uint32_t tile = 0;
  bool natural = false;  // K contiguous: rows load contiguously and are transposed on TensorE
  std::vector<int64_t> batch_sizes, batch_strides;
  // SBUF layout (bytes per partition)
  uint64_t slots_off = 0, chunk_bytes = 0, stage_off = 0, stage_bytes = 0;
  int64_t gw = 0;  // columns per chunk slot
};

// The operand's batch dims ([..., R, C] with R, C its last two), K/J strides and layout.
Operand describe_operand(const TensorDesc& t, bool is_a, uint32_t tile) {
  if (t.dim() < 2) throw std::invalid_argument("matmul operands need at least 2 dims");
  Operand o;
  o.t = &t;
  o.dt = t.dtype;
  o.es = dtype_size(t.dtype);
  const size_t n = t.sizes.size();
  o.batch_sizes.assign(t.sizes.begin(), t.sizes.end() - 2);
  o.batch_strides.assign(t.strides.begin(), t.strides.end() - 2);
  // A is [M, K]; B is [K, N].
  o.J = is_a ? t.sizes[n - 2] : t.sizes[n - 1];
  o.K = is_a ? t.sizes[n - 1] : t.sizes[n - 2];
  o.js = is_a ? t.strides[n - 2] : t.strides[n - 1];
  o.ks = is_a ? t.strides[n - 1] : t.strides[n - 2];
  o.tile = tile;
  const bool k_major = (o.js == 1 && o.J > 1) || o.K == 1;
  o.natural = !k_major && o.ks == 1;
  return o;
}

int64_t batch_offset(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t k = idx.size() - sizes.size();  // right-aligned
  for (size_t d = 0; d < sizes.size(); ++d) off += (sizes[d] == 1 ? 0 : idx[k + d]) * strides[d];
  return off;
}

uint64_t distinct_batches(const Operand& o) {
  uint64_t n = 1;
  for (size_t d = 0; d < o.batch_sizes.size(); ++d) {
    if (o.batch_strides[d] != 0) n *= static_cast<uint64_t>(o.batch_sizes[d]);
  }
  return n;
}

struct Group {
  int64_t a_base = 0, b_base = 0, c_base = 0, bias_base = 0;
  uint32_t mg = 0, ng = 0;
  int first_step = 0, steps = 0;
};

class MatmulEmitter {
 public:
  MatmulEmitter(const std::string& name, const TensorDesc& a, const TensorDesc& b,
                const TensorDesc& c, const std::optional<TensorDesc>& bias, const MatmulSpec& spec,
                const CoreParams& core, bool transposed_out)
      : b_(name, core),
        swapped_(transposed_out),
        core_(core),
        spec_(spec),
        c_(c),
        bias_(bias),
        A_(describe_operand(a, true, core.tensor.columns)),
        B_(describe_operand(b, false, core.tensor.moving_free_max)) {
    const size_t n = c.sizes.size();
    M_ = c.sizes[n - 2];
    N_ = c.sizes[n - 1];
    K_ = A_.K;
    if (B_.K != K_ || A_.J != M_ || B_.J != N_) {
      throw std::invalid_argument(fmt::format("{}: shapes {} @ {} -> {} do not match", name,
                                              a.to_string(), b.to_string(), c.to_string()));
    }
    crs_ = c.strides[n - 2];
    ccs_ = c.strides[n - 1];
    bias_strides_.assign(n, 0);
    if (bias_) {
      const size_t off = n - bias_->sizes.size();
      for (size_t d = 0; d < bias_->sizes.size(); ++d) {
        bias_strides_[off + d] = bias_->sizes[d] == 1 ? 0 : bias_->strides[d];
      }
    }
    bias_rs_ = bias_strides_[n - 2];
    bias_cs_ = bias_strides_[n - 1];
    // A bias constant along the free dim (one value per output partition) is ScalarE's
    // per-partition bias operand: one instruction applies scale, bias and activation.
    bias_column_ = bias_ && bias_cs_ == 0 && bias_rs_ != 0;
  }

  Program build() && {
    plan();
    allocate();
    make_groups();
    emit();
    return std::move(b_).build();
  }

 private:
  // A first-group load: k-tile kt (of its chunk), slot columns [j0, j1).
  struct Ready {
    int64_t kt = 0, j0 = 0, j1 = 0;
    Token token;
  };
  struct Piece {
    int64_t rank = 0;       // issued in rank order: the order TensorE first reads them
    int64_t rank_next = 0;  // pieces merge only when TensorE reads them in the same phase
    bool first = false;     // a piece of the first group
    Ready ready;
    Token release;
    ChunkCache::Slot* slot = nullptr;
    std::vector<Ready>* out = nullptr;  // null for a whole chunk (no per-piece readiness)
    std::vector<std::pair<AccessPattern, AccessPattern>> dma;  // (dst, src)
  };

  void plan() {
    MatmulShape s;
    s.k = K_;
    s.a = {M_, A_.tile, A_.es, A_.natural, distinct_batches(A_)};
    s.b = {N_, B_.tile, B_.es, B_.natural, distinct_batches(B_)};
    s.out_elem_bytes = dtype_size(c_.dtype);
    s.batches = 1;
    for (size_t d = 0; d + 2 < c_.sizes.size(); ++d) s.batches *= c_.sizes[d];
    s.bias = bias_.has_value();
    s.bias_rows = s.bias && bias_rs_ != 0;
    s.bias_column = bias_column_;
    scaled_ = spec_.alpha != 1.0f || !spec_.scales.empty();
    s.tmp = s.bias && !bias_column_ && (spec_.epilogue != ActFunc::kCopy || scaled_);
    s.transposed_out = swapped_;
    tmp_ = s.tmp;
    ordered_ = !A_.natural && !B_.natural;
    double_row_ = is_fp8(A_.dt) && is_fp8(B_.dt) && core_.tensor.fp8_double_row_cost_factor > 0;
    p_ = plan_matmul(s, core_);
    A_.gw = p_.gw_a;
    B_.gw = p_.gw_b;
  }

  void allocate() {
    const uint32_t NT = B_.tile;
    oes_ = dtype_size(c_.dtype);
    out_group_bytes_ = uint64_t{p_.gm} * p_.gn * NT * oes_;
    out_off_ = b_.alloc_sbuf(p_.out_slots * out_group_bytes_);
    if (tmp_) tmp_off_ = b_.alloc_sbuf(2 * uint64_t{NT} * 4);
    if (bias_) bias_off_ = b_.alloc_sbuf(2 * p_.bias_bytes);
    if (swapped_) final_off_ = b_.alloc_sbuf(2 * uint64_t{p_.gm} * A_.tile * oes_);
    Operand& R = p_.a_resident ? A_ : B_;
    Operand& S = p_.a_resident ? B_ : A_;
    for (Operand* o : {&A_, &B_}) {
      o->chunk_bytes = uint64_t{p_.ck} * o->gw * o->es;
      o->stage_bytes =
          uint64_t{p_.ck} * ceil_div(o->gw, core_.tensor.rows) * core_.tensor.rows * o->es;
      if (o->natural) o->stage_off = b_.alloc_sbuf(p_.stage_slots * o->stage_bytes);
    }
    const uint32_t r_slots = p_.resident_slots, s_slots = p_.streamed_slots;
    if (p_.chunks > 0) {
      R.slots_off = b_.alloc_sbuf(r_slots * R.chunk_bytes);
      S.slots_off = b_.alloc_sbuf(s_slots * S.chunk_bytes);
    }
    if (!spec_.scales.empty()) load_scales();
    for (uint32_t i = 0; i < 2 * p_.acc_banks; ++i) acc_bank_.push_back(b_.alloc_psum_bank());
    for (uint32_t i = 0; i < p_.tr_banks; ++i) tr_bank_.push_back(b_.alloc_psum_bank());
    bank_release_.resize(2 * p_.gm * p_.gn);
    tr_release_.resize(tr_bank_.size());
    stage_release_[0].resize(p_.stage_slots);
    stage_release_[1].resize(p_.stage_slots);
    out_release_.resize(p_.out_slots * p_.gm * p_.gn);
    out_prev_.resize(out_release_.size());
  }

  // The output groups in execution order and their chunk steps; the cache keys of every step.
  void make_groups() {
    const int64_t mgroups = ceil_div(ceil_div(M_, A_.tile), p_.gm);
    const int64_t ngroups = ceil_div(ceil_div(N_, B_.tile), p_.gn);
    std::vector<int64_t> bidx(c_.sizes.size(), 0);
    std::map<std::tuple<int64_t, int64_t, int64_t>, int> ids_a, ids_b;
    auto id = [](auto& ids, int64_t base, int64_t g, int64_t c) {
      return ids.try_emplace({base, g, c}, static_cast<int>(ids.size())).first->second;
    };
    const std::vector<int64_t> c_bs(c_.strides.begin(), c_.strides.end() - 2);
    const std::vector<int64_t> c_bz(c_.sizes.begin(), c_.sizes.end() - 2);
    const std::vector<int64_t> bias_bs(bias_strides_.begin(), bias_strides_.end() - 2);
    for (;;) {
      Group g;
      const std::vector<int64_t> batch(bidx.begin(), bidx.end() - 2);
      g.a_base = batch_offset(A_.batch_sizes, A_.batch_strides, batch);
      g.b_base = batch_offset(B_.batch_sizes, B_.batch_strides, batch);
      g.c_base = batch_offset(c_bz, c_bs, batch);
      g.bias_base = batch_offset(c_bz, bias_bs, batch);
      const int64_t groups_r = p_.a_resident ? mgroups : ngroups;
      const int64_t groups_s = p_.a_resident ? ngroups : mgroups;
      for (int64_t blk = 0; blk < groups_r; blk += p_.rb) {
        for (int64_t sg = 0; sg < groups_s; ++sg) {
          for (int64_t rg = blk; rg < std::min<int64_t>(groups_r, blk + p_.rb); ++rg) {
            g.mg = static_cast<uint32_t>(p_.a_resident ? rg : sg);
            g.ng = static_cast<uint32_t>(p_.a_resident ? sg : rg);
            g.first_step = static_cast<int>(step_group_.size());
            g.steps = static_cast<int>(p_.chunks);
            for (uint32_t ch = 0; ch < p_.chunks; ++ch) {
              step_group_.push_back(static_cast<int>(groups_.size()));
              step_chunk_.push_back(ch);
              keys_a_.push_back(id(ids_a, g.a_base, g.mg, ch));
              keys_b_.push_back(id(ids_b, g.b_base, g.ng, ch));
            }
            groups_.push_back(g);
          }
        }
      }
      // Next batch index (odometer over the batch dims); done when it wraps around.
      size_t d = bidx.size() - 2;
      while (d > 0 && ++bidx[d - 1] == c_.sizes[d - 1]) bidx[--d] = 0;
      if (d == 0) break;
    }
    const uint32_t ra = p_.a_resident ? p_.resident_slots : p_.streamed_slots;
    const uint32_t rbs = p_.a_resident ? p_.streamed_slots : p_.resident_slots;
    cache_a_.emplace(ra, keys_a_);
    cache_b_.emplace(rbs, keys_b_);
    kt_ready_[0].resize(ra);
    kt_ready_[1].resize(rbs);
  }

  void emit() {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& g = groups_[gi];
      const int end = g.first_step + g.steps;
      const int tail = tail_steps(gi);
      for (int i = g.first_step; i < end;) {
        // The group's last `tail` steps are emitted together, tile by tile.
        const int i1 = i >= end - tail ? end - 1 : i;
        // Chunks are prepared p_.lookahead steps ahead: TensorE transposes of natural operands
        // sit that far ahead of the matmuls that read them in TensorE's stream.
        const int ahead = static_cast<int>(p_.lookahead);
        for (int j = i; j < std::min<int>(i1 + 1 + ahead, static_cast<int>(keys_a_.size())); ++j) {
          if (j > prepared_ && !prepare(j)) break;
        }
        if (prepared_ < i1) throw std::logic_error("matmul: a chunk found no SBUF slot");
        issue_pieces();
        emit_steps(gi, i, i1);
        i = i1 + 1;
      }
      epilogue(gi);
    }
  }

  // Issues the piece loads prepared so far in the order TensorE first reads them (Piece::rank),
  // adjacent pieces of one k-tile merged into one DMA of at most kPieceMerge pieces.
  void issue_pieces() {
    std::stable_sort(pieces_.begin(), pieces_.end(),
                     [](const Piece& x, const Piece& y) { return x.rank < y.rank; });
    for (size_t i = 0; i < pieces_.size();) {
      size_t j = i + 1;
      const size_t c = issued_pieces_ < kSoloPieces ? 1 : piece_merge();
      while (pieces_[i].out && j < pieces_.size() && j - i < c &&
             pieces_[j].out == pieces_[i].out && pieces_[j].ready.kt == pieces_[i].ready.kt &&
             pieces_[j].ready.j0 == pieces_[j - 1].ready.j1 &&
             pieces_[j].rank_next == pieces_[j - 1].rank_next) {
        ++j;
      }
      Piece pc = pieces_[i];
      if (pc.out) {
        pc.ready.j1 = pieces_[j - 1].ready.j1;
        const uint32_t cw = static_cast<uint32_t>(pc.ready.j1 - pc.ready.j0);
        for (AccessPattern* ap : {&pc.dma[0].first, &pc.dma[0].second}) {
          ap->dims[ap->ndims - 1].size = cw;
        }
      }
      const uint8_t q = !ordered_ ? load_queue()
                        : pc.first && pc.out
                            ? kPieceQueues[piece_count_++ % std::size(kPieceQueues)]
                            : kChunkQueues[chunk_count_++ % chunk_queues()];
      b_.wait(kDma(q), pc.release);
      for (const auto& [dst, src] : pc.dma) b_.emit(kDma(q), isa::dma_copy(dst, src));
      const Token t = b_.mark(kDma(q));
      if (pc.out) {
        pc.ready.token = t;
        pc.out->push_back(pc.ready);
      }
      pc.slot->ready[0] = t;
      loaded(t);
      ++issued_pieces_;
      i = j;
    }
    pieces_.clear();
  }
  // Pieces per merged DMA: as many as TensorE reads in about one descriptor processing time
  // (128 rows over 16 engines: 8 packets each), so fewer DMAs pay it where pieces are read
  // quickly (bf16: 4 moving pieces) and pieces land one by one where each keeps TensorE busy
  // for longer (fp32: 1).
  size_t piece_merge() const {
    const auto& dma = core_.dma;
    const uint32_t rows = core_.tensor.rows;
    const int64_t engines =
        std::min<int64_t>(dma.engines, ceil_div(rows, std::max(1u, dma.partitions_per_engine)));
    const double desc_s = static_cast<double>(ceil_div(rows, std::max<int64_t>(1, engines))) *
                          dma.descriptor_overhead_ns * 1e-9;
    const double f = A_.es == 4 || B_.es == 4 ? core_.tensor.fp32_cost_factor : 1.0;
    const double mm_s =
        std::max(core_.tensor.mm_min_ii_cycles, load_piece()) * f / core_.tensor.frequency_hz;
    return std::max<size_t>(1, static_cast<size_t>(desc_s / mm_s));
  }

  // Chunk loads in flight: two keep a short kernel's loads landing in the order they are needed
  // (fair bandwidth sharing lands concurrent ones together); a long kernel streams, and a third
  // queue hides more descriptor processing behind the others' data.
  uint32_t chunk_queues() const { return p_.estimate_s > kLongKernelS ? 3 : 2; }

  // Loads (and transposes) the chunks step j reads. False when a slot is not free yet.
  bool prepare(int j) {
    for (int side = 0; side < 2; ++side) {
      ChunkCache& cache = side == 0 ? *cache_a_ : *cache_b_;
      const int key = (side == 0 ? keys_a_ : keys_b_)[j];
      if (cache.find(key)) continue;
      const auto v = cache.victim(j, emitted_);
      if (!v) return false;
      const Token release = cache.slot(*v).release;
      cache.fill(*v, j);
      const Group& g = groups_[step_group_[j]];
      Operand& o = side == 0 ? A_ : B_;
      kt_ready_[side][*v].clear();
      load_chunk(o, side, side == 0 ? g.a_base : g.b_base, side == 0 ? g.mg : g.ng, step_chunk_[j],
                 cache.slot(*v), o.slots_off + *v * o.chunk_bytes, release,
                 piece_step(j) ? &kt_ready_[side][*v] : nullptr, j);
    }
    // With a natural operand, whose loads and transposes are emitted here, the K-major loads
    // are issued here too, in step order.
    if (!ordered_) issue_pieces();
    prepared_ = j;
    return true;
  }

  void load_chunk(Operand& o, int side, int64_t base, uint32_t group, uint32_t chunk,
                  ChunkCache::Slot& slot, uint64_t slot_off, Token release,
                  std::vector<Ready>* pieces, int step) {
    const uint32_t P = core_.tensor.rows;
    const int64_t j0 = int64_t{group} * o.gw, jw = std::min<int64_t>(o.gw, o.J - j0);
    const int64_t kt0 = int64_t{chunk} * p_.ck;
    const int64_t nkt = std::min<int64_t>(p_.ck, p_.kt - kt0);
    const int64_t k0 = kt0 * P, klen = std::min<int64_t>(nkt * P, K_ - k0);
    if (!o.natural && pieces && (ordered_ || nkt > 1)) {
      // The first and last groups' chunks load in pieces of one k-tile and one tile's columns
      // (A: a stationary tile, B: a load_piece()-wide moving piece), each marked ready on its
      // own, issued in the order TensorE first reads them (need_rank): TensorE starts once its
      // first stationary and moving pieces are in, not whole chunks (kernel start-up), and the
      // last steps, which finish tile by tile, start before their last chunk is in.
      const int64_t w = !ordered_ ? jw : side == 0 ? o.tile : load_piece();
      for (int64_t kt = 0; kt < nkt; ++kt) {
        const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, klen - kt * P));
        for (int64_t c = 0; c < jw; c += w) {
          const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(w, jw - c));
          Piece pc;
          std::tie(pc.rank, pc.rank_next) = need_rank(step, side, kt, c / w);
          pc.first = step_group_[step] == 0;
          pc.ready = {kt, c, c + cw, Token{}};
          pc.release = release;
          pc.slot = &slot;
          pc.out = pieces;
          pc.dma.push_back({isa::sbuf(o.dt, 0, kp, slot_off + (kt * o.gw + c) * o.es, {{1, cw}}),
                            hbm_ap(*o.t, base + (k0 + kt * P) * o.ks + (j0 + c) * o.js, kp, o.ks,
                                   {{o.js, cw}})});
          pieces_.push_back(pc);
        }
      }
      return;
    }
    if (!o.natural) {
      // [k partitions, kt, j] straight into the slot: runs of jw elements when J is contiguous;
      // issued with the pieces in step order.
      const int64_t full = klen / P, tail = klen % P;
      Piece pc;
      std::tie(pc.rank, pc.rank_next) = need_rank(step, side, 0, 0);
      pc.release = release;
      pc.slot = &slot;
      if (full > 0) {
        pc.dma.push_back(
            {isa::sbuf(o.dt, 0, P, slot_off,
                       {{o.gw, static_cast<uint32_t>(full)}, {1, static_cast<uint32_t>(jw)}}),
             hbm_ap(*o.t, base + k0 * o.ks + j0 * o.js, P, o.ks,
                    {{P * o.ks, static_cast<uint32_t>(full)}, {o.js, static_cast<uint32_t>(jw)}})});
      }
      if (tail > 0) {
        pc.dma.push_back(
            {isa::sbuf(o.dt, 0, static_cast<uint32_t>(tail), slot_off + full * o.gw * o.es,
                       {{1, static_cast<uint32_t>(jw)}}),
             hbm_ap(*o.t, base + (k0 + full * P) * o.ks + j0 * o.js, static_cast<uint32_t>(tail),
                    o.ks, {{o.js, static_cast<uint32_t>(jw)}})});
      }
      pieces_.push_back(pc);
      return;
    }
    const uint8_t q = load_queue();
    // Natural: rows of J (128 per block) with klen contiguous elements each into a staging
    // slot [row, block, k], then each 128 x 128 block transposed on TensorE into PSUM and copied
    // to its place [k, j] in the chunk slot.
    const uint32_t st = stage_count_[side]++ % p_.stage_slots;
    const uint64_t stage_off = o.stage_off + st * o.stage_bytes;
    const int64_t stage_row = int64_t{p_.ck} * P;  // elements per row block in staging
    b_.wait(kDma(q), stage_release_[side][st]);
    const int64_t blocks = jw / P, rest = jw % P;
    if (blocks > 0) {
      b_.emit(kDma(q), isa::dma_copy(isa::sbuf(o.dt, 0, P, stage_off,
                                               {{stage_row, static_cast<uint32_t>(blocks)},
                                                {1, static_cast<uint32_t>(klen)}}),
                                     hbm_ap(*o.t, base + k0 + j0 * o.js, P, o.js,
                                            {{P * o.js, static_cast<uint32_t>(blocks)},
                                             {1, static_cast<uint32_t>(klen)}})));
    }
    if (rest > 0) {
      b_.emit(kDma(q), isa::dma_copy(isa::sbuf(o.dt, 0, static_cast<uint32_t>(rest),
                                               stage_off + blocks * stage_row * o.es,
                                               {{1, static_cast<uint32_t>(klen)}}),
                                     hbm_ap(*o.t, base + k0 + (j0 + blocks * P) * o.js,
                                            static_cast<uint32_t>(rest), o.js,
                                            {{1, static_cast<uint32_t>(klen)}})));
    }
    const Token staged = b_.mark(kDma(q));
    loaded(staged);
    const int64_t nblocks = ceil_div(jw, P);
    const int64_t per_bank = static_cast<int64_t>(core_.psum.bank_bytes() / (P * o.es));
    Token transposed;
    for (int64_t kt = 0; kt < nkt; ++kt) {
      const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, klen - kt * P));
      for (int64_t b0 = 0; b0 < nblocks; b0 += per_bank) {
        const int64_t b1 = std::min(nblocks, b0 + per_bank);
        const uint32_t tb = tr_count_++ % p_.tr_banks;
        b_.wait(kTensor, staged);
        b_.wait(kTensor, tr_release_[tb]);
        for (int64_t blk = b0; blk < b1; ++blk) {
          const uint32_t rows = static_cast<uint32_t>(std::min<int64_t>(P, jw - blk * P));
          b_.emit(kTensor, isa::transpose(
                               isa::psum_tile(o.dt, kp, tr_bank_[tb] + (blk - b0) * P * o.es, rows),
                               isa::sbuf_tile(o.dt, rows,
                                              stage_off + (blk * stage_row + kt * P) * o.es, kp)));
        }
        transposed = b_.mark(kTensor);
        const uint32_t cols = static_cast<uint32_t>(std::min<int64_t>(jw, b1 * P) - b0 * P);
        const AccessPattern src = isa::psum_tile(o.dt, kp, tr_bank_[tb], cols);
        const AccessPattern dst =
            isa::sbuf_tile(o.dt, kp, slot_off + (kt * o.gw + b0 * P) * o.es, cols);
        const StreamId e = pick_engine(cols, true);
        b_.wait(e, transposed);
        b_.wait(e, release);
        if (e == kVector) {
          b_.emit(e, isa::tensor_copy(dst, src));
        } else {
          b_.emit(e, isa::activation(dst, src, ActFunc::kCopy));
        }
        tr_release_[tb] = b_.mark(e);
        slot.ready[e == kVector ? 0 : 1] = tr_release_[tb];
      }
    }
    stage_release_[side][st] = transposed;
  }

  // The queue for the next load. The first two steps' loads go to the first two queues, one
  // behind the other, and the other queues start once the first step's loads are in: the first
  // matmuls then wait for two chunks at full bandwidth, not for every queue's first chunk
  // sharing it. Afterwards loads rotate over all load queues in the order they are needed.
  uint8_t load_queue() {
    const uint32_t n = load_count_++;
    const uint32_t nq = static_cast<uint32_t>(std::size(kLoadQueues));
    const uint32_t i = n < kFirstLoads ? n % 2 : (n - kFirstLoads + 2) % nq;
    const uint8_t q = kLoadQueues[i];
    if (i >= 2 && !queue_started_[i]) {
      for (const Token& t : first_loads_) b_.wait(kDma(q), t);
    }
    queue_started_[i] = true;
    return q;
  }
  void loaded(Token t) {
    if (first_loads_.size() < 2) first_loads_.push_back(t);
  }

  // VectorE or ScalarE, whichever has less estimated work so far (both may read PSUM).
  StreamId pick_engine(uint64_t n, bool either) {
    const double v = std::max<double>(core_.vector.min_ii_cycles, n) / core_.vector.frequency_hz;
    const double s = std::max<double>(core_.scalar.min_ii_cycles, n) / core_.scalar.frequency_hz;
    if (either && busy_vector_ + v > busy_scalar_ + s) {
      busy_scalar_ += s;
      return kScalar;
    }
    busy_vector_ += v;
    return kVector;
  }
  void charge_scalar(uint64_t n) {
    busy_scalar_ += std::max<double>(core_.scalar.min_ii_cycles, n) / core_.scalar.frequency_hz;
  }

  struct TileGeom {
    uint32_t mt, nt, mw, nw;
    uint32_t bank;  // accumulator slot: two groups of gm x gn tiles, packed into PSUM banks
    uint32_t c0;    // first column inside the 512-wide tile (a piece of the kernel's last tile)
  };
  std::vector<TileGeom> tiles_of(const Group& g, size_t gi) const {
    std::vector<TileGeom> t;
    const uint32_t parity = static_cast<uint32_t>(gi % 2) * p_.gm * p_.gn;
    for (uint32_t mt = 0; mt < p_.gm; ++mt) {
      const int64_t m0 = (int64_t{g.mg} * p_.gm + mt) * A_.tile;
      if (m0 >= M_) break;
      for (uint32_t nt = 0; nt < p_.gn; ++nt) {
        const int64_t n0 = (int64_t{g.ng} * p_.gn + nt) * B_.tile;
        if (n0 >= N_) break;
        t.push_back({mt, nt, static_cast<uint32_t>(std::min<int64_t>(A_.tile, M_ - m0)),
                     static_cast<uint32_t>(std::min<int64_t>(B_.tile, N_ - n0)),
                     parity + mt * p_.gn + nt, 0});
      }
    }
    // The kernel's last group finishes in column pieces of the narrowest full-rate matmul: each
    // piece is evicted and stored as soon as it is done, so only the last piece's short
    // eviction and store follow TensorE's last matmul.
    const uint32_t piece = tail_piece();
    if (gi + 1 == groups_.size() && !swapped_) {
      std::vector<TileGeom> split;
      for (const TileGeom& x : t) {
        for (uint32_t c = 0; c < x.nw; c += piece) {
          TileGeom q = x;
          q.c0 = c;
          q.nw = x.nw - c < 2 * piece ? x.nw - c : piece;
          split.push_back(q);
          if (q.nw != piece) break;
        }
      }
      t = std::move(split);
    }
    return t;
  }

  AccessPattern acc_ap(const TileGeom& t) const {
    const uint32_t per_group = p_.gm * p_.gn, group = t.bank / per_group, i = t.bank % per_group;
    return isa::psum_tile(DType::kFp32, t.mw,
                          acc_bank_[group * p_.acc_banks + i / p_.tiles_per_bank] +
                              (i % p_.tiles_per_bank) * p_.acc_tile_bytes + t.c0 * 4ull,
                          t.nw);
  }

  // Steps whose chunks load in pieces: the first group's (start-up) and the kernel's last steps,
  // which finish tile by tile.
  bool piece_step(int j) const {
    if (swapped_) return false;
    const int gi = step_group_[j];
    if (!ordered_) return gi == 0;
    const Group& g = groups_[gi];
    if (gi + 1 == static_cast<int>(groups_.size()) &&
        j >= g.first_step + g.steps - tail_steps(gi)) {
      return true;
    }
    return gi == 0;
  }

  // When TensorE first reads piece `idx` (columns of one stationary tile for A, of one
  // load_piece() moving piece for B) of k-tile kt of step j's chunk: (rank, phase). Steps before
  // the group's tail run k-tile by k-tile, each tile row (stationary) over all moving pieces;
  // the tail runs tile by tile, contraction u of tile p in matmul slot p + u * skew.
  std::pair<int64_t, int64_t> need_rank(int j, int side, int64_t kt, int64_t idx) const {
    const int gi = step_group_[j];
    const Group& g = groups_[gi];
    const int tail0 = g.first_step + g.steps - tail_steps(gi);
    constexpr int64_t kStep = int64_t{1} << 32;
    const int64_t row = ceil_div(B_.gw, load_piece());  // moving pieces per tile row
    if (j < tail0) {
      const int64_t r = side == 1 ? 1 + idx : idx == 0 ? 0 : row + idx;
      return {j * kStep + kt * 4096 + r, j * kStep + kt};
    }
    // Tiles counted in moving pieces (each load_piece() / tail_piece() tail tiles).
    const int64_t u = int64_t{j - tail0} * p_.ck + kt;
    const int64_t first_tile = side == 1 ? idx : idx * row;
    const int64_t skew = p_.ck * tail_steps(gi) > 1 ? static_cast<int64_t>(kTailSkew) : 1;
    return {tail0 * kStep + (first_tile + u * skew) * 2 + side, tail0 * kStep + u};
  }

  // Width of the moving pieces the first group loads B in and runs its first k-tile in.
  uint32_t load_piece() const { return std::max(kLoadPiece, core_.tensor.mm_min_ii_cycles); }
  // Width of the pieces the kernel's last group finishes in: the narrowest full-rate matmul
  // when the eviction is one copy, else 128 columns (a bias or activation adds instructions per
  // piece on VectorE and ScalarE, which narrower pieces would multiply).
  uint32_t tail_piece() const {
    const bool plain = !bias_ && spec_.epilogue == ActFunc::kCopy;
    return ordered_ && plain ? core_.tensor.mm_min_ii_cycles
                             : std::max(128u, core_.tensor.mm_min_ii_cycles);
  }

  // How many final steps of group gi finish tile by tile: for the kernel's last group enough
  // k-tiles that a piece's matmuls take as long as its store (so stores keep up with TensorE
  // and little output is left after its last matmul), at most what the chunk slots hold.
  int tail_steps(size_t gi) const {
    const Group& g = groups_[gi];
    if (gi + 1 != groups_.size() || swapped_ || !ordered_ || g.steps <= 1) {
      return std::min(g.steps, 1);
    }
    const double f = A_.es == 4 || B_.es == 4 ? core_.tensor.fp32_cost_factor : 1.0;
    const double mm_s = std::max<double>(core_.tensor.mm_min_ii_cycles, tail_piece()) * f /
                        core_.tensor.frequency_hz;
    const double bw = core_.dma.engines * core_.dma.engine_bandwidth_bytes_per_s;
    const double store_s = double(std::min<int64_t>(A_.tile, M_)) * tail_piece() * oes_ / bw;
    const int64_t kts = static_cast<int64_t>(std::ceil(store_s / mm_s));
    const uint32_t slots = std::min(cache_a_->size(), cache_b_->size());
    const int64_t steps = std::min<int64_t>({ceil_div(kts, p_.ck), g.steps, slots - 1});
    return static_cast<int>(std::max<int64_t>(1, steps));
  }

  // Emits the matmuls of steps i0..i1 of group gi (i1 > i0 only for a group's last steps).
  void emit_steps(size_t gi, int i0, int i1) {
    const Group& g = groups_[gi];
    const uint32_t P = core_.tensor.rows;
    const auto tiles = tiles_of(g, gi);
    if (i0 == g.first_step) {
      for (const TileGeom& t : tiles) b_.wait(kTensor, bank_release_[t.bank]);
    }
    const bool last = i1 == g.first_step + g.steps - 1;
    struct Step {
      uint32_t sa, sb;
      uint64_t a_off, b_off;
      int64_t kt0;
      const std::vector<Ready>* ready[2];
    };
    // One matmul's contraction: a step and its k-tiles there. FP8 x FP8 on a core with
    // double-row mode (ARCH-v3) contracts two full k-tiles per matmul; the slot's [k, kt, j]
    // layout already holds the pair as its outer free dim ([P, 2, F], row pair gw apart).
    struct KStep {
      size_t step;
      int64_t kt;
      uint32_t n;
    };
    std::vector<Step> steps;
    std::vector<KStep> ksteps;
    for (int i = i0; i <= i1; ++i) {
      Step st;
      st.sa = *cache_a_->find(keys_a_[i]);
      st.sb = *cache_b_->find(keys_b_[i]);
      st.a_off = A_.slots_off + st.sa * A_.chunk_bytes;
      st.b_off = B_.slots_off + st.sb * B_.chunk_bytes;
      st.kt0 = int64_t{step_chunk_[i]} * p_.ck;
      st.ready[0] = &kt_ready_[0][st.sa];
      st.ready[1] = &kt_ready_[1][st.sb];
      for (int side = 0; side < 2; ++side) {
        const ChunkCache::Slot& s = side == 0 ? cache_a_->slot(st.sa) : cache_b_->slot(st.sb);
        if (st.ready[side]->empty()) b_.wait(kTensor, s.ready[0]);
        b_.wait(kTensor, s.ready[1]);
      }
      const int64_t nkt = std::min<int64_t>(p_.ck, p_.kt - st.kt0);
      for (int64_t kt = 0; kt < nkt;) {
        const bool pair = double_row_ && kt + 1 < nkt && (st.kt0 + kt + 2) * P <= K_;
        ksteps.push_back({steps.size(), kt, pair ? 2u : 1u});
        kt += pair ? 2 : 1;
      }
      steps.push_back(st);
    }
    tile_done_.assign(tiles.size(), Token{});
    // First-group pieces: TensorE waits for the k-tile and columns a matmul reads just before it.
    auto wait_ready = [&](const std::vector<Ready>& rs, int64_t kt, int64_t j0, int64_t j1) {
      for (const Ready& r : rs) {
        if (r.kt == kt && r.j0 < j1 && j0 < r.j1) b_.wait(kTensor, r.token);
      }
    };
    auto mm1 = [&](const KStep& ks, const TileGeom& t) {
      const Step& st = steps[ks.step];
      const int64_t kt = ks.kt;
      const int64_t ja = int64_t{t.mt} * A_.tile, jb = int64_t{t.nt} * B_.tile + t.c0;
      for (uint32_t r = 0; r < ks.n; ++r) {
        wait_ready(*st.ready[0], kt + r, ja, ja + t.mw);
        wait_ready(*st.ready[1], kt + r, jb, jb + t.nw);
      }
      const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K_ - (st.kt0 + kt) * P));
      const uint64_t a = st.a_off + (kt * A_.gw + ja) * A_.es;
      const uint64_t bo = st.b_off + (kt * B_.gw + jb) * B_.es;
      const bool acc = st.kt0 + kt > 0;
      if (ks.n == 2) {
        b_.emit(kTensor, isa::matmul_double_row(
                             acc_ap(t), isa::sbuf(A_.dt, 0, kp, a, {{A_.gw, 2}, {1, t.mw}}),
                             isa::sbuf(B_.dt, 0, kp, bo, {{B_.gw, 2}, {1, t.nw}}), acc));
        return;
      }
      b_.emit(kTensor, isa::matmul(acc_ap(t), isa::sbuf_tile(A_.dt, kp, a, t.mw),
                                   isa::sbuf_tile(B_.dt, kp, bo, t.nw), acc));
    };
    // The kernel's first k-tile runs in moving pieces as they arrive (same TensorE cycles:
    // each piece is a full-rate matmul).
    auto mm = [&](const KStep& ks, const TileGeom& t) {
      if (!ordered_ || gi != 0 || steps[ks.step].kt0 + ks.kt != 0 || t.nw <= load_piece()) {
        return mm1(ks, t);
      }
      for (uint32_t c = 0; c < t.nw; c += load_piece()) {
        TileGeom q = t;
        q.c0 = t.c0 + c;
        q.nw = std::min(load_piece(), t.nw - c);
        mm1(ks, q);
      }
    };
    if (!last) {
      for (const KStep& ks : ksteps) {
        for (const TileGeom& t : tiles) mm(ks, t);
      }
    } else {
      // A group's last steps finish one tile after the other, each marked done, so the
      // epilogue and store of the first tiles overlap TensorE finishing the rest. Tile ti's
      // u-th contraction runs in slot ti + u * skew (ties: the older tile first), so each
      // tile's later k-tiles are read skew - 1 matmuls after its first: their loads get
      // that much time, and tiles still finish about one per contraction count.
      const size_t nu = ksteps.size(), nt = tiles.size();
      const size_t skew = nu > 1 ? kTailSkew : 1;
      std::vector<std::pair<size_t, size_t>> order;  // (tile, contraction)
      for (size_t ti = 0; ti < nt; ++ti) {
        for (size_t u = 0; u < nu; ++u) order.push_back({ti, u});
      }
      std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
        const size_t dx = x.first + x.second * skew, dy = y.first + y.second * skew;
        return dx != dy ? dx < dy : x.first < y.first;
      });
      for (const auto& [ti, u] : order) {
        mm(ksteps[u], tiles[ti]);
        if (u + 1 == nu && ti + 1 < nt) tile_done_[ti] = b_.mark(kTensor);
      }
    }
    const Token done = b_.mark(kTensor);
    if (last) {
      for (Token& t : tile_done_) {
        if (t.value == 0) t = done;
      }
    }
    for (size_t s = 0; s < steps.size(); ++s) {
      cache_a_->used(steps[s].sa, i0 + static_cast<int>(s), done);
      cache_b_->used(steps[s].sb, i0 + static_cast<int>(s), done);
    }
    emitted_ = i1 + 1;
  }

  // The product's scale (alpha times every spec_.scales value) on every partition: each value
  // loads broadcast to all partitions and VectorE multiplies them into one column.
  void load_scales() {
    const uint32_t P = core_.tensor.rows;
    const size_t n = spec_.scales.size();
    scale_off_ = b_.alloc_sbuf(n * 4);
    const StreamId q = kDma(kBiasQueue);
    for (size_t i = 0; i < n; ++i) {
      const TensorDesc& s = spec_.scales[i];
      if (s.numel() != 1) {
        throw std::invalid_argument(
            fmt::format("matmul scale {} must hold one value, got {}", i, s.to_string()));
      }
      b_.emit(q, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, scale_off_ + i * 4, 1),
                               hbm_ap(s, 0, P, 0, {{1, 1}})));
    }
    b_.wait(kVector, b_.mark(q));
    const AccessPattern col = isa::sbuf_tile(DType::kFp32, P, scale_off_, 1);
    for (size_t i = 1; i < n; ++i) {
      b_.emit(kVector,
              isa::tensor_tensor(col, col, isa::sbuf_tile(DType::kFp32, P, scale_off_ + i * 4, 1),
                                 AluOp::kMultiply));
    }
    if (spec_.alpha != 1.0f) {
      b_.emit(kVector, isa::tensor_scalar(col, col, AluOp::kMultiply, isa::imm(spec_.alpha)));
    }
    scale_ready_ = b_.mark(kVector);
  }

  // The epilogue's scale operand for a tile of `rows` partitions.
  ScalarOperand alpha(uint32_t rows) const {
    if (spec_.scales.empty()) return isa::imm(spec_.alpha);
    return isa::per_partition(isa::sbuf_tile(DType::kFp32, rows, scale_off_, 1));
  }

  // Loads the group's bias (scaled by beta) into a bias slot; returns its ready token.
  Token load_bias(const Group& g, uint64_t off) {
    const uint32_t P = core_.tensor.rows;
    const StreamId q = kDma(kBiasQueue);
    const int64_t m0 = int64_t{g.mg} * p_.gm * A_.tile, n0 = int64_t{g.ng} * p_.gn * B_.tile;
    const uint32_t nw = static_cast<uint32_t>(std::min<int64_t>(B_.gw, N_ - n0));
    const uint32_t bs = bias_count_ % 2;
    b_.wait(q, bias_release_[bs]);
    uint32_t rows = static_cast<uint32_t>(std::min<int64_t>(P, M_));
    if (bias_column_) {
      // [rows, 1] per tile along M: slot element (p, mt).
      for (uint32_t mt = 0; mt < p_.gm && m0 + int64_t{mt} * A_.tile < M_; ++mt) {
        const int64_t r0 = m0 + int64_t{mt} * A_.tile;
        rows = static_cast<uint32_t>(std::min<int64_t>(A_.tile, M_ - r0));
        b_.emit(q, isa::dma_copy(isa::sbuf(DType::kFp32, 0, rows, off + mt * 4ull, {{1, 1}}),
                                 hbm_ap(*bias_, g.bias_base + r0 * bias_rs_ + n0 * bias_cs_, rows,
                                        bias_rs_, {{1, 1}})));
      }
    } else if (bias_rs_ == 0) {
      b_.emit(
          q, isa::dma_copy(isa::sbuf(DType::kFp32, 0, rows, off, {{1, nw}}),
                           hbm_ap(*bias_, g.bias_base + n0 * bias_cs_, rows, 0, {{bias_cs_, nw}})));
    } else {
      for (uint32_t mt = 0; mt < p_.gm && m0 + int64_t{mt} * A_.tile < M_; ++mt) {
        const int64_t r0 = m0 + int64_t{mt} * A_.tile;
        rows = static_cast<uint32_t>(std::min<int64_t>(A_.tile, M_ - r0));
        b_.emit(q, isa::dma_copy(
                       isa::sbuf(DType::kFp32, 0, rows, off + mt * uint64_t(B_.gw) * 4, {{1, nw}}),
                       hbm_ap(*bias_, g.bias_base + r0 * bias_rs_ + n0 * bias_cs_, rows, bias_rs_,
                              {{bias_cs_, nw}})));
      }
    }
    Token ready = b_.mark(q);
    if (spec_.beta != 1.0f) {
      const uint32_t parts = bias_rs_ == 0 ? static_cast<uint32_t>(std::min<int64_t>(P, M_)) : P;
      const uint32_t cols = static_cast<uint32_t>(p_.bias_bytes / 4);
      const AccessPattern t = isa::sbuf_tile(DType::kFp32, parts, off, cols);
      b_.wait(kVector, ready);
      b_.emit(kVector, isa::tensor_scalar(t, t, AluOp::kMultiply, isa::imm(spec_.beta)));
      busy_vector_ +=
          std::max<double>(core_.vector.min_ii_cycles, cols) / core_.vector.frequency_hz;
      ready = b_.mark(kVector);
    }
    return ready;
  }

  void epilogue(size_t gi) {
    const Group& g = groups_[gi];
    const auto tiles = tiles_of(g, gi);
    if (g.steps == 0) {  // K == 0: the product is zero
      for (const TileGeom& t : tiles) {
        b_.wait(kVector, bank_release_[t.bank]);
        b_.emit(kVector, isa::memset(acc_ap(t), 0.0f));
      }
      tile_done_.assign(tiles.size(), b_.mark(kVector));
    }
    Token bias_ready;
    uint64_t bias_slot = 0;
    if (bias_) {
      bias_slot = bias_off_ + (bias_count_ % 2) * p_.bias_bytes;
      bias_ready = load_bias(g, bias_slot);
    }
    const ActFunc f = spec_.epilogue;
    for (StreamId e : {kVector, kScalar}) b_.wait(e, scale_ready_);
    for (size_t ti = 0; ti < tiles.size(); ++ti) {
      const TileGeom& t = tiles[ti];
      const Token done = tile_done_[ti];
      const AccessPattern acc = acc_ap(t);
      // Output tiles rotate through out_slots x gm x gn tile slots.
      // Column pieces of one tile share its slot: the first piece takes the slot and every
      // piece waits for the slot's previous stores.
      const uint32_t nslots = static_cast<uint32_t>(out_release_.size());
      const uint32_t os = t.c0 == 0 ? out_count_++ % nslots : (out_count_ - 1) % nslots;
      if (t.c0 == 0) {
        out_prev_[os] = std::move(out_release_[os]);
        out_release_[os].clear();
      }
      const AccessPattern out =
          isa::sbuf_tile(c_.dtype, t.mw, out_off_ + (os * uint64_t{B_.tile} + t.c0) * oes_, t.nw);
      StreamId reader;
      if (bias_column_) {
        const AccessPattern col =
            isa::sbuf(DType::kFp32, 0, t.mw, bias_slot + t.mt * 4ull, {{1, 1}});
        b_.wait(kScalar, done);
        b_.wait(kScalar, bias_ready);
        for (const Token& w : out_prev_[os]) b_.wait(kScalar, w);
        b_.emit(kScalar, isa::activation(out, acc, f, alpha(t.mw), isa::per_partition(col)));
        charge_scalar(t.nw);
        const Token r = b_.mark(kScalar);
        bank_release_[t.bank] = r;
        bias_release_[bias_count_ % 2] = r;
        store(g, t, out, r, os);
        continue;
      }
      if (!bias_) {
        if (f == ActFunc::kCopy) {
          reader = pick_engine(t.nw, true);
        } else {
          reader = kScalar;
          charge_scalar(t.nw);
        }
        b_.wait(reader, done);
        for (const Token& w : out_prev_[os]) b_.wait(reader, w);
        if (reader == kVector) {
          b_.emit(kVector, !scaled_ ? isa::tensor_copy(out, acc)
                                    : isa::tensor_scalar(out, acc, AluOp::kMultiply, alpha(t.mw)));
        } else {
          b_.emit(kScalar, isa::activation(out, acc, f, alpha(t.mw)));
        }
        const Token r = b_.mark(reader);
        bank_release_[t.bank] = r;
        store(g, t, out, r, os);
        continue;
      }
      // Bias: VectorE adds it (it varies along the free dim); ScalarE applies the activation.
      reader = kVector;
      pick_engine(t.nw, false);
      const AccessPattern bias_t = isa::sbuf_tile(
          DType::kFp32, t.mw,
          bias_slot + ((bias_rs_ != 0 ? t.mt : 0) * uint64_t(B_.gw) + t.nt * B_.tile + t.c0) * 4,
          t.nw);
      const uint32_t ts = tmp_count_++ % 2;
      const AccessPattern tmp =
          isa::sbuf_tile(DType::kFp32, t.mw, tmp_off_ + ts * uint64_t{B_.tile} * 4, t.nw);
      b_.wait(kVector, done);
      b_.wait(kVector, bias_ready);
      if (tmp_) b_.wait(kVector, tmp_release_[ts]);
      AccessPattern src = acc;
      if (scaled_) {
        b_.emit(kVector, isa::tensor_scalar(tmp, acc, AluOp::kMultiply, alpha(t.mw)));
        src = tmp;
        pick_engine(t.nw, false);
      }
      if (f == ActFunc::kCopy) {
        for (const Token& w : out_prev_[os]) b_.wait(kVector, w);
        b_.emit(kVector, isa::tensor_tensor(out, src, bias_t, AluOp::kAdd));
        const Token r = b_.mark(kVector);
        bank_release_[t.bank] = r;
        bias_release_[bias_count_ % 2] = r;
        store(g, t, out, r, os);
        continue;
      }
      b_.emit(kVector, isa::tensor_tensor(tmp, src, bias_t, AluOp::kAdd));
      const Token v = b_.mark(kVector);
      bank_release_[t.bank] = v;
      bias_release_[bias_count_ % 2] = v;
      b_.wait(kScalar, v);
      for (const Token& w : out_prev_[os]) b_.wait(kScalar, w);
      b_.emit(kScalar, isa::activation(out, tmp, f));
      charge_scalar(t.nw);
      tmp_release_[ts] = b_.mark(kScalar);
      store(g, t, out, tmp_release_[ts], os);
    }
    if (bias_) ++bias_count_;
    if (swapped_) store_transposed(g);
  }

  // Stores one tile as soon as its epilogue wrote it: the last group's store starts early.
  void store(const Group& g, const TileGeom& t, const AccessPattern& out, Token ready,
             uint32_t slot) {
    if (swapped_) {
      pending_.push_back({t, out, ready, slot});
      return;
    }
    const StreamId q = kDma(kStoreQueues[store_count_++ % std::size(kStoreQueues)]);
    const int64_t m0 = (int64_t{g.mg} * p_.gm + t.mt) * A_.tile;
    const int64_t n0 = (int64_t{g.ng} * p_.gn + t.nt) * B_.tile + t.c0;
    b_.wait(q, ready);
    b_.emit(q, isa::dma_copy(
                   hbm_ap(c_, g.c_base + m0 * crs_ + n0 * ccs_, t.mw, crs_, {{ccs_, t.nw}}), out));
    out_release_[slot].push_back(b_.mark(q));
  }

  // Weight-stationary frame: the kernel computed C^T in tiles [n rows, m cols]. TensorE transposes
  // each group's tiles of one column block into a PSUM bank side by side, a copy engine moves the
  // [m, n] block to SBUF, and one DMA stores it as rows of C.
  void store_transposed(const Group& g) {
    std::vector<PendingTile> tiles = std::move(pending_);
    pending_.clear();
    for (size_t i = 0; i < tiles.size();) {
      size_t j = i;
      const uint32_t tb = tr_count_++ % p_.tr_banks;
      b_.wait(kTensor, tr_release_[tb]);
      uint32_t cols = 0;
      const uint32_t rows = tiles[i].t.nw;
      for (; j < tiles.size() && tiles[j].t.nt == tiles[i].t.nt; ++j) {
        const PendingTile& x = tiles[j];
        b_.wait(kTensor, x.ready);
        b_.emit(kTensor,
                isa::transpose(isa::psum_tile(c_.dtype, rows, tr_bank_[tb] + cols * oes_, x.t.mw),
                               x.out));
        cols += x.t.mw;
      }
      const Token tr = b_.mark(kTensor);
      for (size_t k = i; k < j; ++k) out_release_[tiles[k].slot].push_back(tr);
      const uint32_t fs = final_count_++ % 2;
      const AccessPattern fin =
          isa::sbuf_tile(c_.dtype, rows, final_off_ + fs * uint64_t{p_.gm} * A_.tile * oes_, cols);
      const StreamId e = pick_engine(cols, true);
      b_.wait(e, tr);
      b_.wait(e, final_release_[fs]);
      const AccessPattern ps = isa::psum_tile(c_.dtype, rows, tr_bank_[tb], cols);
      if (e == kVector) {
        b_.emit(e, isa::tensor_copy(fin, ps));
      } else {
        b_.emit(e, isa::activation(fin, ps, ActFunc::kCopy));
      }
      const Token copied = b_.mark(e);
      tr_release_[tb] = copied;
      const TileGeom& t0 = tiles[i].t;
      const int64_t m0 = (int64_t{g.mg} * p_.gm + t0.mt) * A_.tile;
      const int64_t n0 = (int64_t{g.ng} * p_.gn + t0.nt) * B_.tile;
      const StreamId q = kDma(kStoreQueues[store_count_++ % std::size(kStoreQueues)]);
      b_.wait(q, copied);
      b_.emit(
          q, isa::dma_copy(hbm_ap(c_, g.c_base + m0 * crs_ + n0 * ccs_, rows, ccs_, {{crs_, cols}}),
                           fin));
      final_release_[fs] = b_.mark(q);
      i = j;
    }
  }

  static StreamId kDma(uint8_t q) { return dma_queue(q); }

  ProgramBuilder b_;
  const CoreParams& core_;
  MatmulSpec spec_;
  const TensorDesc& c_;
  const std::optional<TensorDesc>& bias_;
  Operand A_, B_;
  int64_t M_ = 0, N_ = 0, K_ = 0, crs_ = 0, ccs_ = 0, bias_rs_ = 0, bias_cs_ = 0;
  std::vector<int64_t> bias_strides_;
  MatmulPlan p_;
  bool swapped_ = false;      // computing C^T (weight-stationary); outputs transposed back
  bool bias_column_ = false;  // the bias is one value per output partition
  bool tmp_ = false;
  // Both operands K-major: all loads are issued in need order after a step's prepare loop
  // (issue_pieces); with a natural operand they are issued as before, chunk by chunk.
  bool ordered_ = false;
  bool double_row_ = false;  // FP8 x FP8 matmuls contract two k-tiles each (ARCH-v3)
  bool scaled_ = false;      // the epilogue multiplies by alpha or the scale tensors
  uint64_t scale_off_ = 0;   // [P, scales] fp32: column 0 is the product's scale
  Token scale_ready_;
  struct PendingTile {
    TileGeom t;
    AccessPattern out;
    Token ready;
    uint32_t slot;
  };
  std::vector<PendingTile> pending_;
  uint64_t final_off_ = 0;
  uint32_t final_count_ = 0;
  Token final_release_[2];
  uint64_t oes_ = 0, out_group_bytes_ = 0, out_off_ = 0, tmp_off_ = 0, bias_off_ = 0;
  std::vector<uint64_t> acc_bank_, tr_bank_;

  std::vector<Group> groups_;
  std::vector<int> step_group_;
  std::vector<uint32_t> step_chunk_;
  std::vector<int> keys_a_, keys_b_;
  std::optional<ChunkCache> cache_a_, cache_b_;
  std::vector<Piece> pieces_;  // first-group loads of the steps being prepared
  uint32_t issued_pieces_ = 0, piece_count_ = 0, chunk_count_ = 0;
  std::vector<std::vector<Ready>> kt_ready_[2];  // per slot: its first-group load pieces
  int prepared_ = -1, emitted_ = 0;

  std::vector<Token> bank_release_, tr_release_;
  // Per output slot: the stores (or transposes) reading its current tile, and its previous one.
  std::vector<std::vector<Token>> out_release_, out_prev_;
  std::vector<Token> stage_release_[2];
  Token tmp_release_[2], bias_release_[2];
  std::vector<Token> tile_done_;  // the current group's tiles: last matmul done
  uint32_t stage_count_[2] = {0, 0}, tr_count_ = 0, out_count_ = 0, tmp_count_ = 0, bias_count_ = 0,
           store_count_ = 0, load_count_ = 0;
  double busy_vector_ = 0, busy_scalar_ = 0;
  std::vector<Token> first_loads_;
  bool queue_started_[std::size(kLoadQueues)] = {};
};

}  // namespace

Program build_matmul(const std::string& name, const TensorDesc& a, const TensorDesc& b,
                     const TensorDesc& c, const std::optional<TensorDesc>& bias,
                     const MatmulSpec& spec, const CoreParams& core) {
  if (c.dim() < 2 || a.dim() < 2 || b.dim() < 2) {
    throw std::invalid_argument("matmul operands need at least 2 dims");
  }
  if (c.numel() == 0) return Program{name, {}, {}};
  // Decode-shaped products (few rows, a wide weight) run weight-stationary: C^T = B^T A^T, so
  // the weight is TensorE's stationary operand and each matmul streams only the few rows of A
  // (ISA-2.26: max(min(64, N_stationary), N_moving) cycles per 128 x 128 weight tile instead of
  // 512 per 128 x 512); the C^T tiles are transposed back on TensorE before the store.
  const int64_t M = c.sizes[c.sizes.size() - 2], N = c.sizes.back();
  const bool swap = M <= core.tensor.mm_min_ii_cycles && N >= core.tensor.moving_free_max &&
                    c.strides.back() == 1;
  if (!swap) return MatmulEmitter(name, a, b, c, bias, spec, core, false).build();
  auto t = [](TensorDesc d) {
    const size_t n = d.sizes.size();
    std::swap(d.sizes[n - 1], d.sizes[n - 2]);
    std::swap(d.strides[n - 1], d.strides[n - 2]);
    return d;
  };
  std::optional<TensorDesc> bias_t;
  if (bias) {
    TensorDesc e{bias->address, bias->dtype, c.sizes, broadcast_strides(*bias, c.sizes)};
    bias_t = t(e);
  }
  return MatmulEmitter(name, t(b), t(a), t(c), bias_t, spec, core, true).build();
}

}  // namespace neuronsim::kernels
