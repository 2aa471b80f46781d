#include "neuronsim/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/synced_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Buffer = SyncedBuilder::Buffer;

namespace {

// The running row max starts no lower than this: a row whose first key block is wholly masked
// (-inf) then gets exp(-inf) = 0 instead of exp(-inf + inf) = NaN, and later blocks rescale it
// away (its correction factor underflows to 0).
constexpr float kMaxFloor = -1e30f;

// DMA queues by role: K and V of the next batch load while this one computes; Q tiles, mask
// tiles (one queue per step in flight) and stores alternate so one waits while another
// transfers.
constexpr uint8_t kKQueue = 0, kVQueue = 1, kQQueue = 2, kMaskQueue = 4, kStoreQueue = 8;

// SBUF bytes per partition a batch-invariant mask may keep resident.
constexpr uint64_t kResidentMaskBytes = 32 << 10;

// Steps (a Q tile against one key block) in flight: the emission runs two steps ahead.
constexpr int kSteps = 3;

struct Slot {
  uint64_t off = 0;
  Buffer buf = -1;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// `t`'s strides over the batch dims `batch` (right-aligned, 0 where `t` broadcasts).
std::vector<int64_t> batch_strides(const TensorDesc& t, const std::vector<int64_t>& batch,
                                   const char* what) {
  const size_t nb = t.sizes.size() - 2;
  if (nb > batch.size()) {
    throw std::invalid_argument(
        fmt::format("flash attention: {} {} has more batch dims than the "
                    "output",
                    what, t.to_string()));
  }
  std::vector<int64_t> s(batch.size(), 0);
  const size_t off = batch.size() - nb;
  for (size_t d = 0; d < nb; ++d) {
    if (t.sizes[d] == batch[off + d]) {
      s[off + d] = t.sizes[d] == 1 ? 0 : t.strides[d];
    } else if (t.sizes[d] != 1) {
      throw std::invalid_argument(fmt::format(
          "flash attention: {} {} does not broadcast to the output's batch", what, t.to_string()));
    }
  }
  return s;
}

int64_t dot(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
  return off;
}

class FlashEmitter {
 public:
  FlashEmitter(const std::string& name, const TensorDesc& q, const TensorDesc& k,
               const TensorDesc& v, const TensorDesc& o, const std::optional<TensorDesc>& mask,
               const AttentionSpec& spec, const CoreParams& core)
      : pb_(name, core),
        sb_(pb_),
        core_(core),
        q_(q),
        k_(k),
        v_(v),
        o_(o),
        mask_(mask),
        spec_(spec) {
    check(name, core);
  }

  Program build() && {
    if (batches_ > 0 && sq_ > 0) {
      allocate();
      run();
    }
    return std::move(pb_).build();
  }

 private:
  void check(const std::string& name, const CoreParams& core) {
    for (const TensorDesc* t : {&q_, &k_, &v_, &o_}) {
      if (t->dim() < 2 || t->strides.size() != t->sizes.size()) {
        throw std::invalid_argument(fmt::format(
            "{}: flash attention operands need [..., S, D]; got {}", name, t->to_string()));
      }
    }
    const auto last = [](const TensorDesc& t, int i) { return t.sizes[t.sizes.size() - i]; };
    sq_ = last(o_, 2);
    sk_ = last(k_, 2);
    d_ = last(q_, 1);
    dv_ = last(o_, 1);
    if (last(q_, 2) != sq_ || last(k_, 1) != d_ || last(v_, 2) != sk_ || last(v_, 1) != dv_) {
      throw std::invalid_argument(
          fmt::format("{}: flash attention shapes q {} k {} v {} -> o {} do not match", name,
                      q_.to_string(), k_.to_string(), v_.to_string(), o_.to_string()));
    }
    p_ = std::min({core.sbuf.partitions, core.tensor.rows, core.tensor.columns});
    if (d_ < 1 || d_ > p_ || dv_ < 1 || dv_ > p_) {
      throw std::invalid_argument(fmt::format(
          "{}: flash attention needs head dims in 1..{}; got D {} and Dv {}", name, p_, d_, dv_));
    }
    if (sk_ < 1) throw std::invalid_argument(name + ": flash attention over no keys");
    dt_ = q_.dtype;
    if (k_.dtype != dt_ || v_.dtype != dt_ ||
        (dt_ != DType::kFp32 && dt_ != DType::kBf16 && dt_ != DType::kFp16)) {
      throw std::invalid_argument(fmt::format(
          "{}: flash attention needs q, k and v of one dtype (fp32, bf16 or fp16); got {}, {}, {}",
          name, dtype_name(q_.dtype), dtype_name(k_.dtype), dtype_name(v_.dtype)));
    }
    if (!is_float(o_.dtype) || (mask_ && !is_float(mask_->dtype))) {
      throw std::invalid_argument(name + ": flash attention output and mask must be float");
    }
    if (!(spec_.scale > 0.0f) || !std::isfinite(spec_.scale)) {
      throw std::invalid_argument(fmt::format(
          "{}: flash attention scale must be finite and > 0; got {}", name, spec_.scale));
    }
    batch_.assign(o_.sizes.begin(), o_.sizes.end() - 2);
    qb_ = batch_strides(q_, batch_, "q");
    kb_ = batch_strides(k_, batch_, "k");
    vb_ = batch_strides(v_, batch_, "v");
    ob_ = batch_strides(o_, batch_, "o");
    if (mask_) {
      std::vector<int64_t> full = batch_;
      full.push_back(sq_);
      full.push_back(sk_);
      const std::vector<int64_t> ms = broadcast_strides(*mask_, full);
      mb_.assign(ms.begin(), ms.end() - 2);
      m_rs_ = ms[ms.size() - 2];
      m_cs_ = ms.back();
      // A mask shared by every batch (a causal or padding pattern over [Sq, Sk]) stays in SBUF
      // when small: loaded once instead of once per batch.
      mask_resident_ = std::all_of(mb_.begin(), mb_.end(), [](int64_t x) { return x == 0; }) &&
                       static_cast<uint64_t>(ceil_div(sq_, p_) * sk_) * 4 <= kResidentMaskBytes;
    }
    batches_ = 1;
    for (int64_t s : batch_) batches_ *= s;
    es_ = dtype_size(dt_);
    blk_ = static_cast<uint32_t>(
        std::min<uint64_t>(core.tensor.moving_free_max, core.psum.bank_bytes() / 4) / p_ * p_);
    if (blk_ == 0 || core.psum.bank_bytes() < 4 * uint64_t{p_} * 4) {
      throw std::invalid_argument(name + ": flash attention needs PSUM banks of 4 x 128 fp32");
    }
    nkt_ = ceil_div(sk_, p_);
  }

  Slot slot(uint64_t bytes) { return {pb_.alloc_sbuf(bytes), sb_.buffer()}; }

  // A score bank and the P^T pieces later staged in it (what the score matmul overwrites).
  std::vector<Buffer> s_bank_bufs(int ss) const {
    std::vector<Buffer> v{s_psum_[ss].buf};
    v.insert(v.end(), pt_stage_buf_[ss].begin(), pt_stage_buf_[ss].end());
    return v;
  }

  void allocate() {
    const uint64_t nkt = static_cast<uint64_t>(nkt_);
    if (mask_resident_) {
      mask_res_off_ = pb_.alloc_sbuf(static_cast<uint64_t>(ceil_div(sq_, p_) * sk_) * 4);
      for (int64_t t = 0; t < ceil_div(sq_, p_); ++t) mask_res_buf_.push_back(sb_.buffer());
    }
    const uint64_t D = static_cast<uint64_t>(d_), Dv = static_cast<uint64_t>(dv_);
    k_stage_ = slot(nkt * D * es_);
    for (int s = 0; s < kSteps; ++s) {
      kt_off_[s] = pb_.alloc_sbuf(static_cast<uint64_t>(sk_) * es_);
      v_off_[s] = pb_.alloc_sbuf(nkt * Dv * es_);
      for (int64_t t = 0; t < nkt_; ++t) {
        kt_buf_[s].push_back(sb_.buffer());
        v_buf_[s].push_back(sb_.buffer());
      }
      if (mask_ || spec_.causal) s_sb_[s] = slot(uint64_t{blk_} * 4);
      if (mask_ && !mask_resident_) mask_tile_[s] = slot(uint64_t{blk_} * 4);
      prob_[s] = slot(uint64_t{blk_} * es_);
      pt_off_[s] = pb_.alloc_sbuf(uint64_t{blk_} * es_);
      for (uint32_t c = 0; c < blk_ / p_; ++c) pt_buf_[s].push_back(sb_.buffer());
    }
    for (int s = 0; s < 2; ++s) {
      q_stage_[s] = slot(D * es_);
      qt_[s] = slot(uint64_t{p_} * es_);
      out_[s] = slot(Dv * dtype_size(o_.dtype));
    }
    for (auto* col : {&mblk_, &negm_, &corr_, &rs_, &l_}) {
      for (Slot& s : *col) s = slot(4, 4);
    }
    for (Slot& s : recip_) s = slot(4, 4);
    // PSUM: a score bank per step in flight (which later stages its P^T pieces) and a bank of
    // two O accumulators ([128, Dv] fp32) and two transpose stages ([D, 128]).
    for (int s = 0; s < kSteps; ++s) {
      s_psum_[s] = {pb_.alloc_psum_bank(), sb_.buffer()};
      for (uint32_t c = 0; c < blk_ / p_; ++c) pt_stage_buf_[s].push_back(sb_.buffer());
    }
    const uint64_t misc = pb_.alloc_psum_bank();
    const uint64_t quarter = core_.psum.bank_bytes() / 4;
    for (int s = 0; s < 2; ++s) o_psum_[s] = {misc + s * quarter, sb_.buffer()};
    const uint64_t stage = uint64_t{p_} * es_;
    for (uint64_t off = 2 * quarter; off + stage <= 4 * quarter; off += stage) {
      tr_psum_.push_back({misc + off, sb_.buffer()});
    }
  }

  Slot slot(uint64_t bytes, uint64_t align) { return {pb_.alloc_sbuf(bytes, align), sb_.buffer()}; }

  // Every instruction is marked: the emission runs steps ahead, so a consumer emitted later
  // must not wait for its producer's later-emitted work too (SyncedBuilder::publish).
  void emit(StreamId s, const Instruction& in, const std::vector<Buffer>& reads,
            const std::vector<Buffer>& writes) {
    sb_.emit(s, in, reads, writes);
    sb_.publish(s);
  }

  // Alternates the PSUM-to-SBUF copies between ScalarE and VectorE.
  StreamId copy_engine() { return (copies_++ % 2) ? kVector : kScalar; }

  // The next transpose stage in PSUM.
  Slot& next_stage() { return tr_psum_[stages_++ % tr_psum_.size()]; }

  // K (transposed on TensorE into K^T, head dim on partitions) and V of batch `b` into `s`.
  void load_kv(const std::vector<int64_t>& idx, int s) {
    const int64_t kbase = dot(idx, kb_), vbase = dot(idx, vb_);
    const auto& ks = k_.strides;
    const auto& vs = v_.strides;
    const int64_t k_rs = ks[ks.size() - 2], k_cs = ks.back();
    const int64_t v_rs = vs[vs.size() - 2], v_cs = vs.back();
    const int64_t full = sk_ / p_, rem = sk_ % p_;
    const uint32_t D = static_cast<uint32_t>(d_), Dv = static_cast<uint32_t>(dv_);
    std::vector<Buffer> vbufs = v_buf_[s];
    // Row r = t * 128 + p of K goes to partition p, tile t; one transfer for the full tiles.
    if (full > 0) {
      emit(dma_queue(kKQueue),
           isa::dma_copy(
               isa::sbuf(dt_, 0, p_, k_stage_.off, {{d_, static_cast<uint32_t>(full)}, {1, D}}),
               hbm_ap(k_, kbase, p_, k_rs, {{p_ * k_rs, static_cast<uint32_t>(full)}, {k_cs, D}})),
           {}, {k_stage_.buf});
      emit(dma_queue(kVQueue),
           isa::dma_copy(
               isa::sbuf(dt_, 0, p_, v_off_[s], {{dv_, static_cast<uint32_t>(full)}, {1, Dv}}),
               hbm_ap(v_, vbase, p_, v_rs, {{p_ * v_rs, static_cast<uint32_t>(full)}, {v_cs, Dv}})),
           {}, vbufs);
    }
    if (rem > 0) {
      const uint32_t r = static_cast<uint32_t>(rem);
      emit(dma_queue(kKQueue),
           isa::dma_copy(isa::sbuf(dt_, 0, r, k_stage_.off + full * d_ * es_, {{1, D}}),
                         hbm_ap(k_, kbase + full * p_ * k_rs, r, k_rs, {{k_cs, D}})),
           {}, {k_stage_.buf});
      emit(dma_queue(kVQueue),
           isa::dma_copy(isa::sbuf(dt_, 0, r, v_off_[s] + full * dv_ * es_, {{1, Dv}}),
                         hbm_ap(v_, vbase + full * p_ * v_rs, r, v_rs, {{v_cs, Dv}})),
           {}, vbufs);
    }
  }

  void transpose_k(int s) {
    for (int64_t t = 0; t < nkt_; ++t) {
      const uint32_t kr = static_cast<uint32_t>(std::min<int64_t>(p_, sk_ - t * p_));
      const uint32_t D = static_cast<uint32_t>(d_);
      Slot& st = next_stage();
      const AccessPattern stage = isa::psum_tile(dt_, D, st.off, kr);
      emit(kTensor,
           isa::transpose(stage, isa::sbuf(dt_, 0, kr, k_stage_.off + t * d_ * es_, {{1, D}})),
           {k_stage_.buf}, {st.buf});
      emit(copy_engine(),
           isa::tensor_copy(isa::sbuf(dt_, 0, D, kt_off_[s] + t * p_ * es_, {{1, kr}}), stage),
           {st.buf}, {kt_buf_[s][static_cast<size_t>(t)]});
    }
  }

  // Q rows [q0, q0 + qr) of batch `idx`, transposed into qt_[s].
  void load_q(const std::vector<int64_t>& idx, int64_t q0, uint32_t qr, int s) {
    const auto& qs = q_.strides;
    const int64_t q_rs = qs[qs.size() - 2], q_cs = qs.back();
    const uint32_t D = static_cast<uint32_t>(d_);
    emit(dma_queue(static_cast<uint8_t>(kQQueue + s)),
         isa::dma_copy(isa::sbuf(dt_, 0, qr, q_stage_[s].off, {{1, D}}),
                       hbm_ap(q_, dot(idx, qb_) + q0 * q_rs, qr, q_rs, {{q_cs, D}})),
         {}, {q_stage_[s].buf});
    Slot& st = next_stage();
    const AccessPattern stage = isa::psum_tile(dt_, D, st.off, qr);
    emit(kTensor, isa::transpose(stage, isa::sbuf(dt_, 0, qr, q_stage_[s].off, {{1, D}})),
         {q_stage_[s].buf}, {st.buf});
    emit(copy_engine(), isa::tensor_copy(isa::sbuf_tile(dt_, D, qt_[s].off, qr), stage), {st.buf},
         {qt_[s].buf});
  }

  // The causal predicate for a diagonal block whose first key is `d` after its first query:
  // 1 where key k0 + j <= query q0 + p, built once per offset on GpSimdE.
  Slot causal_valid(int64_t d) {
    auto it = valid_.find(d);
    if (it != valid_.end()) return it->second;
    const Slot s = slot(uint64_t{blk_} * 2);
    const AccessPattern t = isa::sbuf_tile(DType::kBf16, p_, s.off, blk_);
    // j - p + d: bf16 keeps its sign and zero exactly, all the compare needs.
    emit(kGpSimd, isa::iota(t, static_cast<int32_t>(d), -1, {1}), {}, {s.buf});
    emit(kGpSimd, isa::tensor_scalar(t, t, AluOp::kIsLe, isa::imm(0.0f)), {s.buf}, {s.buf});
    valid_[d] = s;
    return s;
  }

  struct Step {
    std::vector<int64_t> idx;
    int64_t batch = 0, tile = 0;  // running counts
    int64_t q0 = 0, k0 = 0;
    uint32_t qr = 0, w = 0;
    bool first = false, last = false, new_batch = false, new_tile = false;
  };

  std::vector<Step> steps() const {
    std::vector<Step> out;
    std::vector<int64_t> idx(batch_.size(), 0);
    int64_t tile = 0;
    for (int64_t b = 0; b < batches_; ++b) {
      for (int64_t q0 = 0; q0 < sq_; q0 += p_, ++tile) {
        const uint32_t qr = static_cast<uint32_t>(std::min<int64_t>(p_, sq_ - q0));
        // Causal: keys beyond the tile's last query are masked for every row.
        const int64_t kend = spec_.causal ? std::min<int64_t>(sk_, q0 + qr) : sk_;
        for (int64_t k0 = 0; k0 < kend; k0 += blk_) {
          Step s;
          s.idx = idx;
          s.batch = b;
          s.tile = tile;
          s.q0 = q0;
          s.qr = qr;
          s.k0 = k0;
          s.w = static_cast<uint32_t>(std::min<int64_t>(blk_, kend - k0));
          s.first = k0 == 0;
          s.last = k0 + blk_ >= kend;
          s.new_tile = s.first;
          s.new_batch = s.first && q0 == 0;
          out.push_back(std::move(s));
        }
      }
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < batch_[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }

  void run() {
    const std::vector<Step> all = steps();
    // Software pipelining, two steps deep: each iteration emits the loads, scores and softmax
    // of step i + 2, the P transposes of step i + 1 and the P @ V of step i, so every engine
    // has later steps' work queued while it waits for another engine's part of this one (a
    // step is a chain of hops between TensorE, VectorE and ScalarE).
    const size_t n = all.size();
    auto scores = [&](size_t j) {
      if (j >= n) return;
      front(all, j);
      softmax(all, j);
    };
    scores(0);
    scores(1);
    if (n > 0) transpose_p(all, 0);
    for (size_t i = 0; i < n; ++i) {
      scores(i + 2);
      if (i + 1 < n) transpose_p(all, i + 1);
      accumulate(all, i);
    }
  }

  // Loads and the score matmul of step i.
  void front(const std::vector<Step>& all, size_t i) {
    const Step& st = all[i];
    const int bs = static_cast<int>(st.batch % kSteps);
    if (st.new_batch) {
      if (loaded_ <= st.batch) load_kv(st.idx, bs);
      loaded_ = st.batch + 1;
      transpose_k(bs);
    }
    const int ts = static_cast<int>(st.tile % 2);
    if (st.new_tile) load_q(st.idx, st.q0, st.qr, ts);
    const int ss = static_cast<int>(i % kSteps);
    const uint32_t D = static_cast<uint32_t>(d_);
    std::vector<Buffer> reads{qt_[ts].buf};
    for (int64_t t = st.k0 / p_; t < ceil_div(st.k0 + st.w, p_); ++t) {
      reads.push_back(kt_buf_[bs][static_cast<size_t>(t)]);
    }
    emit(kTensor,
         isa::matmul(isa::psum_tile(DType::kFp32, st.qr, s_psum_[ss].off, st.w),
                     isa::sbuf_tile(dt_, D, qt_[ts].off, st.qr),
                     isa::sbuf(dt_, 0, D, kt_off_[bs] + st.k0 * es_, {{1, st.w}}), false),
         reads, s_bank_bufs(ss));
    if (mask_resident_ && st.batch == 0 && st.new_tile) {
      // One load per Q tile for every batch: [qr, Sk], scaled once.
      const size_t t = static_cast<size_t>(st.q0 / p_);
      const AccessPattern rows = isa::sbuf(DType::kFp32, 0, st.qr, mask_res_off_ + t * sk_ * 4,
                                           {{1, static_cast<uint32_t>(sk_)}});
      emit(dma_queue(static_cast<uint8_t>(kMaskQueue + t % 2)),
           isa::dma_copy(rows, hbm_ap(*mask_, st.q0 * m_rs_, st.qr, m_rs_,
                                      {{m_cs_, static_cast<uint32_t>(sk_)}})),
           {}, {mask_res_buf_[t]});
      emit(kGpSimd, isa::tensor_scalar(rows, rows, AluOp::kMultiply, isa::imm(1.0f / spec_.scale)),
           {mask_res_buf_[t]}, {mask_res_buf_[t]});
    } else if (mask_ && !mask_resident_) {
      const Slot& mt = mask_tile_[ss];
      const AccessPattern tile = isa::sbuf_tile(DType::kFp32, st.qr, mt.off, st.w);
      emit(dma_queue(static_cast<uint8_t>(kMaskQueue + ss)),
           isa::dma_copy(tile, hbm_ap(*mask_, dot(st.idx, mb_) + st.q0 * m_rs_ + st.k0 * m_cs_,
                                      st.qr, m_rs_, {{m_cs_, st.w}})),
           {}, {mt.buf});
      // mask / scale: the exp applies the scale to scores and mask together.
      emit(kGpSimd, isa::tensor_scalar(tile, tile, AluOp::kMultiply, isa::imm(1.0f / spec_.scale)),
           {mt.buf}, {mt.buf});
    }
  }

  // Online softmax of step i: the running max, P = exp(scale * (S - max)) with its row sum and
  // the correction exp(scale * (old max - new max)) of what came before.
  void softmax(const std::vector<Step>& all, size_t i) {
    const Step& st = all[i];
    const int ss = static_cast<int>(i % kSteps), ps = static_cast<int>((i + kSteps - 1) % kSteps);
    const uint32_t qr = st.qr, w = st.w;
    auto col = [&](const Slot& s) { return isa::sbuf_tile(DType::kFp32, qr, s.off, 1); };
    AccessPattern src = isa::psum_tile(DType::kFp32, qr, s_psum_[ss].off, w);
    Buffer src_buf = s_psum_[ss].buf;
    if (mask_) {
      const AccessPattern ssb = isa::sbuf_tile(DType::kFp32, qr, s_sb_[ss].off, w);
      const size_t t = static_cast<size_t>(st.q0 / p_);
      const AccessPattern m =
          mask_resident_
              ? isa::sbuf(DType::kFp32, 0, qr, mask_res_off_ + (t * sk_ + st.k0) * 4, {{1, w}})
              : isa::sbuf_tile(DType::kFp32, qr, mask_tile_[ss].off, w);
      const Buffer mb = mask_resident_ ? mask_res_buf_[t] : mask_tile_[ss].buf;
      emit(kVector, isa::tensor_tensor(ssb, src, m, AluOp::kAdd), {src_buf, mb}, {s_sb_[ss].buf});
      src = ssb;
      src_buf = s_sb_[ss].buf;
    }
    if (spec_.causal && st.k0 + w - 1 > st.q0) {
      const Slot valid = causal_valid(st.k0 - st.q0);
      const AccessPattern ssb = isa::sbuf_tile(DType::kFp32, qr, s_sb_[ss].off, w);
      emit(kVector,
           isa::select(ssb, isa::sbuf_tile(DType::kBf16, qr, valid.off, w), src,
                       -std::numeric_limits<float>::infinity()),
           {valid.buf, src_buf}, {s_sb_[ss].buf});
      src = ssb;
      src_buf = s_sb_[ss].buf;
    }
    // The running max lives as negm = -scale * max: the bias of the exps, updated with one
    // instruction (min over the scaled block max, with the floor on the first block).
    const Slot &mblk = mblk_[ss], &negm = negm_[ss], &negm_prev = negm_[ps], &corr = corr_[ss],
               &rs = rs_[ss], &l = l_[st.tile % kSteps];
    emit(kVector, isa::tensor_reduce(col(mblk), src, ReduceOp::kMax), {src_buf}, {mblk.buf});
    if (st.first) {
      emit(kVector,
           isa::tensor_scalar(col(negm), col(mblk), AluOp::kMax, isa::imm(kMaxFloor),
                              AluOp::kMultiply, isa::imm(-spec_.scale)),
           {mblk.buf}, {negm.buf});
    } else {
      emit(kVector,
           isa::tensor_scalar(col(negm), col(mblk), AluOp::kMultiply, isa::imm(-spec_.scale),
                              AluOp::kMin, isa::per_partition(col(negm_prev))),
           {mblk.buf, negm_prev.buf}, {negm.buf});
      // corr = exp(scale * (old max - new max)) = exp(negm - old negm)
      emit(kScalar,
           isa::activation(col(corr), col(negm_prev), ActFunc::kExp, isa::imm(-1.0f),
                           isa::per_partition(col(negm))),
           {negm_prev.buf, negm.buf}, {corr.buf});
    }
    const AccessPattern prob = isa::sbuf_tile(dt_, qr, prob_[ss].off, w);
    Instruction e = isa::activation(prob, src, ActFunc::kExp, isa::imm(spec_.scale),
                                    isa::per_partition(col(negm)));
    e.has_acc_dst = true;
    e.acc_dst = col(st.first ? l : rs);
    emit(kScalar, e, {src_buf, negm.buf}, {prob_[ss].buf, st.first ? l.buf : rs.buf});
  }

  // P^T of step i in 128-key pieces (keys on partitions, the stationary operand of P @ V),
  // staged in the step's score bank, which the softmax has finished reading.
  void transpose_p(const std::vector<Step>& all, size_t i) {
    const Step& st = all[i];
    const int ss = static_cast<int>(i % kSteps);
    const uint32_t qr = st.qr, w = st.w;
    const uint32_t pieces = static_cast<uint32_t>(ceil_div(w, p_));
    for (uint32_t c = 0; c < pieces; ++c) {
      const uint32_t kr = std::min(p_, w - c * p_);
      const AccessPattern stage = isa::psum_tile(dt_, kr, s_psum_[ss].off + c * p_ * es_, qr);
      // Its softmax has read the scores: P comes from the exp, the last reader.
      emit(kTensor,
           isa::transpose(stage, isa::sbuf(dt_, 0, qr, prob_[ss].off + c * p_ * es_, {{1, kr}})),
           {prob_[ss].buf}, {pt_stage_buf_[ss][c]});
      // On ScalarE: VectorE has the row max, the bookkeeping and the rescale of O.
      emit(kScalar,
           isa::tensor_copy(isa::sbuf(dt_, 0, kr, pt_off_[ss] + c * p_ * es_, {{1, qr}}), stage),
           {pt_stage_buf_[ss][c]}, {pt_buf_[ss][c]});
    }
  }

  // l = l * corr + rowsum, O = O * corr + P V of step i; the tile's output after its last block.
  void accumulate(const std::vector<Step>& all, size_t i) {
    const Step& st = all[i];
    const int ss = static_cast<int>(i % kSteps), ts = static_cast<int>(st.tile % 2);
    const int bs = static_cast<int>(st.batch % kSteps);
    const uint32_t qr = st.qr, w = st.w;
    const Slot &corr = corr_[ss], &rs = rs_[ss], &l = l_[st.tile % kSteps];
    auto col = [&](const Slot& s) { return isa::sbuf_tile(DType::kFp32, qr, s.off, 1); };
    if (st.new_batch) {
      // Prefetch the next batch's K and V (its buffers were last read by batch - 2, whose
      // P @ V is emitted) unless its first step already loaded them.
      for (size_t j = i + 1; j < all.size(); ++j) {
        if (!all[j].new_batch) continue;
        if (loaded_ <= all[j].batch) {
          load_kv(all[j].idx, static_cast<int>(all[j].batch % kSteps));
          loaded_ = all[j].batch + 1;
        }
        break;
      }
    }
    const Slot& acc = o_psum_[ts];
    const AccessPattern o_acc =
        isa::psum_tile(DType::kFp32, qr, acc.off, static_cast<uint32_t>(dv_));
    if (!st.first) {
      emit(kVector,
           isa::tensor_scalar(col(l), col(l), AluOp::kMultiply, isa::per_partition(col(corr)),
                              AluOp::kAdd, isa::per_partition(col(rs))),
           {l.buf, corr.buf, rs.buf}, {l.buf});
      emit(kVector,
           isa::tensor_scalar(o_acc, o_acc, AluOp::kMultiply, isa::per_partition(col(corr))),
           {acc.buf, corr.buf}, {acc.buf});
    }
    const uint32_t pieces = static_cast<uint32_t>(ceil_div(w, p_));
    for (uint32_t c = 0; c < pieces; ++c) {
      const uint32_t kr = std::min(p_, w - c * p_);
      const int64_t t = st.k0 / p_ + c;
      const bool accumulate = !(st.first && c == 0);
      std::vector<Buffer> reads{pt_buf_[ss][c], v_buf_[bs][static_cast<size_t>(t)]};
      if (accumulate) reads.push_back(acc.buf);
      emit(kTensor,
           isa::matmul(
               o_acc, isa::sbuf(dt_, 0, kr, pt_off_[ss] + c * p_ * es_, {{1, qr}}),
               isa::sbuf(dt_, 0, kr, v_off_[bs] + t * dv_ * es_, {{1, static_cast<uint32_t>(dv_)}}),
               accumulate),
           reads, {acc.buf});
    }
    if (st.last) finish(st, ts, l);
  }

  // O / l, stored once.
  void finish(const Step& st, int ts, const Slot& l) {
    const uint32_t qr = st.qr, Dv = static_cast<uint32_t>(dv_);
    const Slot &r = recip_[ts], &acc = o_psum_[ts], &out = out_[ts];
    Instruction recip = isa::tensor_scalar(isa::sbuf_tile(DType::kFp32, qr, r.off, 1),
                                           isa::sbuf_tile(DType::kFp32, qr, l.off, 1),
                                           AluOp::kDivide, isa::imm(1.0f));
    recip.reverse0 = true;  // 1 / l
    emit(kVector, recip, {l.buf}, {r.buf});
    const AccessPattern tile = isa::sbuf_tile(o_.dtype, qr, out.off, Dv);
    emit(kVector,
         isa::tensor_scalar(tile, isa::psum_tile(DType::kFp32, qr, acc.off, Dv), AluOp::kMultiply,
                            isa::per_partition(isa::sbuf_tile(DType::kFp32, qr, r.off, 1))),
         {acc.buf, r.buf}, {out.buf});
    const auto& os = o_.strides;
    const int64_t o_rs = os[os.size() - 2], o_cs = os.back();
    emit(dma_queue(static_cast<uint8_t>(kStoreQueue + ts)),
         isa::dma_copy(hbm_ap(o_, dot(st.idx, ob_) + st.q0 * o_rs, qr, o_rs, {{o_cs, Dv}}), tile),
         {out.buf}, {});
  }

  ProgramBuilder pb_;
  SyncedBuilder sb_;
  const CoreParams& core_;
  const TensorDesc &q_, &k_, &v_, &o_;
  const std::optional<TensorDesc>& mask_;
  AttentionSpec spec_;
  int64_t sq_ = 0, sk_ = 0, d_ = 0, dv_ = 0, batches_ = 0, nkt_ = 0;
  uint32_t p_ = 128, blk_ = 512;
  DType dt_ = DType::kFp32;
  uint64_t es_ = 4;
  std::vector<int64_t> batch_, qb_, kb_, vb_, ob_, mb_;
  int64_t m_rs_ = 0, m_cs_ = 0;
  bool mask_resident_ = false;
  uint64_t mask_res_off_ = 0;
  std::vector<Buffer> mask_res_buf_;
  // SBUF
  Slot k_stage_;
  // Per step in flight (step % kSteps), per batch (K^T, V: batch % kSteps) or per Q tile
  // (tile % 2; the running sum, written by a tile's first softmax: tile % kSteps).
  uint64_t kt_off_[kSteps] = {}, v_off_[kSteps] = {}, pt_off_[kSteps] = {};
  std::vector<Buffer> kt_buf_[kSteps], v_buf_[kSteps], pt_buf_[kSteps];
  Slot s_sb_[kSteps], mask_tile_[kSteps], prob_[kSteps];
  Slot mblk_[kSteps], negm_[kSteps], corr_[kSteps], rs_[kSteps], l_[kSteps];
  Slot q_stage_[2], qt_[2], out_[2], recip_[2];
  std::map<int64_t, Slot> valid_;
  // PSUM
  Slot s_psum_[kSteps], o_psum_[2];
  std::vector<Buffer> pt_stage_buf_[kSteps];
  std::vector<Slot> tr_psum_;
  uint64_t copies_ = 0, stages_ = 0;
  int64_t loaded_ = 0;  // batches whose K and V loads are emitted
};

}  // namespace

Program build_flash_attention(const std::string& name, const TensorDesc& q, const TensorDesc& k,
                              const TensorDesc& v, const TensorDesc& o,
                              const std::optional<TensorDesc>& mask, const AttentionSpec& spec,
                              const CoreParams& core) {
  return FlashEmitter(name, q, k, v, o, mask, spec, core).build();
}

}  // namespace neuronsim::kernels
