#include "neuronsim/kernels/compiler/matmul_region.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels::compiler {

using namespace device_model;
using Buffer = SyncedBuilder::Buffer;

namespace {

uint32_t ceil_div(int64_t a, int64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

AccessPattern hbm(const MatmulOperand& o, int64_t elem, uint32_t parts, int64_t pstride,
                  int64_t fstride, uint32_t count) {
  AccessPattern ap;
  ap.space = MemSpace::kHbm;
  ap.dtype = o.dtype;
  ap.partitions = parts;
  ap.partition_stride = pstride;
  ap.offset = static_cast<uint64_t>(static_cast<int64_t>(o.address) +
                                    elem * static_cast<int64_t>(dtype_size(o.dtype)));
  ap.ndims = 1;
  ap.dims[0] = {fstride, count};
  return ap;
}

int64_t batch_offset(const std::vector<int64_t>& strides, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size() && d < strides.size(); ++d) off += idx[d] * strides[d];
  return off;
}

}  // namespace

Program build_matmul_region(const MatmulRegionSpec& spec, const CoreParams& core) {
  const int64_t M = spec.m, K = spec.k, N = spec.n;
  if (M <= 0 || N <= 0) return Program{spec.name, {}, {}, {}};
  for (int64_t s : spec.batch) {
    if (s == 0) return Program{spec.name, {}, {}, {}};
  }
  if (K <= 0) throw std::invalid_argument(spec.name + ": empty contraction");
  const MatmulOperand& A = spec.a;
  const MatmulOperand& B = spec.b;
  if ((A.dtype == DType::kFp32) != (B.dtype == DType::kFp32) || !is_float(A.dtype)) {
    throw std::invalid_argument(fmt::format("{}: operands {} and {} do not multiply on TensorE",
                                            spec.name, dtype_name(A.dtype), dtype_name(B.dtype)));
  }
  const uint32_t P = core.tensor.rows, MT = core.tensor.columns, NT = core.tensor.moving_free_max;
  const uint32_t KT = ceil_div(K, P), m_tiles = ceil_div(M, MT), n_tiles = ceil_div(N, NT);
  const uint32_t ncols = static_cast<uint32_t>(std::min<int64_t>(N, NT));
  const uint64_t esA = dtype_size(A.dtype), esB = dtype_size(B.dtype);

  ProgramBuilder b(spec.name, core);
  SyncedBuilder sb(b);
  // Per-column epilogue operands (a bias) kept per N tile when every copy fits 16 KiB per
  // partition (N up to 4096 for one fp32 bias).
  TileEmitter ep(spec.epilogue, sb, core, ncols, n_tiles, 4, 8, 2, false, 16 << 10);

  // A is loaded row-major and transposed on TensorE when K is its contiguous dim (and M is
  // not); likewise B when K is contiguous. Other layouts are DMA'd K-major directly (strided
  // layouts element by element, as the device would).
  const bool a_natural = A.col_stride == 1 && !(A.row_stride == 1 || M == 1);
  const bool b_natural = B.row_stride == 1 && !(B.col_stride == 1 || N == 1);
  const uint32_t stripe = static_cast<uint32_t>(std::min<int64_t>(int64_t{KT} * P, 4 * P));
  uint64_t acc_bank[2], tr_bank[2];
  Buffer acc_buf[2], tr_buf[2];
  for (int i = 0; i < 2; ++i) {
    acc_bank[i] = b.alloc_psum_bank();
    acc_buf[i] = sb.buffer();
    tr_bank[i] = b.alloc_psum_bank();
    tr_buf[i] = sb.buffer();
  }
  // What stays resident: all of A (then N tiles outermost), else all of B, else both stream.
  const uint64_t used = b.alloc_sbuf(0);
  const uint64_t a_tile = uint64_t{KT} * MT * esA, b_tile = uint64_t{KT} * ncols * esB;
  const uint64_t stage_bytes = a_natural || b_natural ? uint64_t{stripe} * std::max(esA, esB) : 0;
  // Batched products keep two sets of the resident operand, so the next batch's loads and
  // transposes overlap this batch's matmuls.
  int64_t batches = 1;
  for (int64_t s : spec.batch) batches *= s;
  uint32_t sets = 1;
  enum class Plan { kAResident, kBResident, kStream } plan;
  const uint32_t want = batches > 1 ? 2 : 1;
  auto plan_for = [&](uint64_t avail, Plan* p, uint32_t* st) {
    *st = 1;
    if (want * uint64_t{m_tiles} * a_tile + 2 * b_tile <= avail) {
      *p = Plan::kAResident;
      *st = want;
    } else if (uint64_t{m_tiles} * a_tile + 2 * b_tile <= avail) {
      *p = Plan::kAResident;
    } else if (want * uint64_t{n_tiles} * b_tile + 2 * a_tile <= avail) {
      *p = Plan::kBResident;
      *st = want;
    } else if (uint64_t{n_tiles} * b_tile + 2 * a_tile <= avail) {
      *p = Plan::kBResident;
    } else if (2 * a_tile + 2 * b_tile <= avail) {
      *p = Plan::kStream;
    } else {
      return false;
    }
    return true;
  };
  auto avail_with = [&](uint32_t stages) {
    const uint64_t u = used + stages * stage_bytes;
    return core.sbuf.partition_bytes > u ? core.sbuf.partition_bytes - u : 0;
  };
  if (!plan_for(avail_with(2), &plan, &sets)) {
    throw std::length_error(
        fmt::format("{}: contraction {} too large for the SBUF tiling", spec.name, K));
  }
  // Row stripes staged for TensorE transposes: a stripe's load waits for the transposes of the
  // stripe that used its buffer before, then starts a DMA launch latency (~1.3 us) later. Up
  // to eight buffers keep the loads ahead, as long as the plan above still fits.
  uint32_t stages = 2;
  if (stage_bytes > 0) {
    for (uint32_t s = 8; s > 2; s /= 2) {
      Plan p2;
      uint32_t sets2;
      if (plan_for(avail_with(s), &p2, &sets2) && p2 == plan && sets2 == sets) {
        stages = s;
        break;
      }
    }
  }
  uint64_t stage_off = 0;
  std::vector<Buffer> stage_buf(stages, 0);
  if (stage_bytes > 0) {
    stage_off = b.alloc_sbuf(stages * stage_bytes);
    for (auto& x : stage_buf) x = sb.buffer();
  }
  const uint32_t a_slots = plan == Plan::kAResident ? sets * m_tiles : 2;
  const uint32_t b_slots = plan == Plan::kBResident ? sets * n_tiles : 2;
  const uint64_t a_off = b.alloc_sbuf(a_slots * a_tile);
  const uint64_t b_off = b.alloc_sbuf(b_slots * b_tile);
  std::vector<Buffer> a_buf(a_slots), b_buf(b_slots);
  for (auto& x : a_buf) x = sb.buffer();
  for (auto& x : b_buf) x = sb.buffer();

  // Operand loads take turns on two queues each (A on 0 and 2, B on 1 and 3; the epilogue's loads
  // and stores have 4 to 9): one queue alone serialises a large operand's transfers behind its
  // descriptor processing, as the library's matmul spreads its loads too.
  uint64_t a_loads = 0, b_loads = 0;
  auto qa = [&] { return dma_queue(static_cast<uint8_t>(2 * (a_loads++ % 2))); };
  auto qb = [&] { return dma_queue(static_cast<uint8_t>(1 + 2 * (b_loads++ % 2))); };
  uint64_t stage_count = 0, tr_count = 0, tile_count = 0;

  // Transposes one staged stripe [rows, sw] (rows on partitions) into K-major destination
  // tiles: dst(kt) is the [kp, rows] pattern of k tile kt.
  auto transpose_stripe = [&](DType dt, uint64_t es, int slot, uint32_t rows, uint32_t s0,
                              uint32_t sw, Buffer dst_buf,
                              const std::function<AccessPattern(uint32_t kt, uint32_t kp)>& dst) {
    for (uint32_t k0 = 0; k0 < sw; k0 += P) {
      const uint32_t kp = std::min(P, sw - k0), kt = (s0 + k0) / P;
      const int tb = static_cast<int>(tr_count++ % 2);
      const AccessPattern ps = isa::psum_tile(dt, kp, tr_bank[tb], rows);
      sb.emit(kTensor,
              isa::transpose(
                  ps, isa::sbuf(dt, 0, rows, stage_off + slot * stage_bytes + k0 * es, {{1, kp}})),
              {stage_buf[slot]}, {tr_buf[tb]});
      sb.emit(kVector, isa::tensor_copy(dst(kt, kp), ps), {tr_buf[tb]}, {dst_buf});
    }
  };
  auto load_a = [&](const std::vector<int64_t>& bidx, uint32_t mi, uint32_t slot) {
    const int64_t m0 = int64_t{mi} * MT;
    const uint32_t mw = static_cast<uint32_t>(std::min<int64_t>(MT, M - m0));
    const int64_t base = batch_offset(A.batch_strides, bidx) + m0 * A.row_stride;
    const uint64_t dst = a_off + slot * a_tile;
    if (!a_natural) {
      for (uint32_t kt = 0; kt < KT; ++kt) {
        const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
        sb.emit(qa(),
                isa::dma_copy(isa::sbuf_tile(A.dtype, kp, dst + kt * MT * esA, mw),
                              hbm(A, base + int64_t{kt} * P * A.col_stride, kp, A.col_stride,
                                  A.row_stride, mw)),
                {}, {a_buf[slot]});
      }
      return;
    }
    for (uint32_t s0 = 0; s0 < K; s0 += stripe) {
      const uint32_t sw = static_cast<uint32_t>(std::min<int64_t>(stripe, K - s0));
      const int ss = static_cast<int>(stage_count++ % stages);
      sb.emit(qa(),
              isa::dma_copy(isa::sbuf(A.dtype, 0, mw, stage_off + ss * stage_bytes, {{1, sw}}),
                            hbm(A, base + s0, mw, A.row_stride, 1, sw)),
              {}, {stage_buf[ss]});
      transpose_stripe(A.dtype, esA, ss, mw, s0, sw, a_buf[slot], [&](uint32_t kt, uint32_t kp) {
        return isa::sbuf_tile(A.dtype, kp, dst + kt * MT * esA, mw);
      });
    }
  };
  auto load_b = [&](const std::vector<int64_t>& bidx, uint32_t ni, uint32_t slot) {
    const int64_t n0 = int64_t{ni} * NT;
    const uint32_t nw = static_cast<uint32_t>(std::min<int64_t>(NT, N - n0));
    const int64_t base = batch_offset(B.batch_strides, bidx) + n0 * B.col_stride;
    const uint64_t dst = b_off + slot * b_tile;
    if (!b_natural) {
      for (uint32_t kt = 0; kt < KT; ++kt) {
        const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
        sb.emit(qb(),
                isa::dma_copy(isa::sbuf_tile(B.dtype, kp, dst + kt * ncols * esB, nw),
                              hbm(B, base + int64_t{kt} * P * B.row_stride, kp, B.row_stride,
                                  B.col_stride, nw)),
                {}, {b_buf[slot]});
      }
      return;
    }
    for (uint32_t r0 = 0; r0 < nw; r0 += P) {
      const uint32_t rows = std::min(P, nw - r0);
      for (uint32_t s0 = 0; s0 < K; s0 += stripe) {
        const uint32_t sw = static_cast<uint32_t>(std::min<int64_t>(stripe, K - s0));
        const int ss = static_cast<int>(stage_count++ % stages);
        sb.emit(qb(),
                isa::dma_copy(
                    isa::sbuf(B.dtype, 0, rows, stage_off + ss * stage_bytes, {{1, sw}}),
                    hbm(B, base + int64_t{r0} * B.col_stride + s0, rows, B.col_stride, 1, sw)),
                {}, {stage_buf[ss]});
        transpose_stripe(
            B.dtype, esB, ss, rows, s0, sw, b_buf[slot], [&](uint32_t kt, uint32_t kp) {
              return isa::sbuf(B.dtype, 0, kp, dst + kt * ncols * esB + r0 * esB, {{1, rows}});
            });
      }
    }
  };
  const std::vector<int64_t>& ep_shape = spec.epilogue.shape;
  std::vector<std::pair<TileEmitter::Tile, uint32_t>> pending;
  auto product_tile = [&](const std::vector<int64_t>& bidx, uint32_t mi, uint32_t ni,
                          uint32_t a_slot, uint32_t b_slot) {
    const int64_t m0 = int64_t{mi} * MT, n0 = int64_t{ni} * NT;
    const uint32_t mw = static_cast<uint32_t>(std::min<int64_t>(MT, M - m0));
    const uint32_t nw = static_cast<uint32_t>(std::min<int64_t>(NT, N - n0));
    const int ab = static_cast<int>(tile_count % 2);
    const AccessPattern acc = isa::psum_tile(DType::kFp32, mw, acc_bank[ab], nw);
    for (uint32_t kt = 0; kt < KT; ++kt) {
      const uint32_t kp = static_cast<uint32_t>(std::min<int64_t>(P, K - int64_t{kt} * P));
      sb.emit(
          kTensor,
          isa::matmul(acc, isa::sbuf_tile(A.dtype, kp, a_off + a_slot * a_tile + kt * MT * esA, mw),
                      isa::sbuf_tile(B.dtype, kp, b_off + b_slot * b_tile + kt * ncols * esB, nw),
                      kt > 0),
          {a_buf[a_slot], b_buf[b_slot]}, {acc_buf[ab]});
    }
    TileEmitter::Tile t;
    t.rows = mw;
    t.c0 = n0;
    t.cols = nw;
    t.slot = ab;
    t.first = tile_count == 0;
    t.acc = acc;
    t.acc_buf = acc_buf[ab];
    t.operand_ap = [&spec, &ep_shape, bidx, m0, n0, mw](int k, uint32_t count) {
      const TileOperand& op = spec.epilogue.operands.at(static_cast<size_t>(k));
      const size_t nd = ep_shape.size();
      int64_t off = m0 * op.strides[nd - 2] + n0 * op.strides[nd - 1];
      for (size_t d = 0; d < bidx.size(); ++d) off += bidx[d] * op.strides[d];
      AccessPattern ap;
      ap.space = MemSpace::kHbm;
      ap.dtype = op.dtype;
      ap.partitions = mw;
      ap.partition_stride = op.strides[nd - 2];
      ap.offset = static_cast<uint64_t>(static_cast<int64_t>(op.address) +
                                        off * static_cast<int64_t>(dtype_size(op.dtype)));
      ap.ndims = 1;
      ap.dims[0] = {op.strides[nd - 1], count};
      return ap;
    };
    // An epilogue is emitted as soon as its accumulator is done when the product has several
    // K tiles: it then runs under the next tile's matmuls (paired with the next tile's
    // epilogue it would wait for them, and a layer norm after the last one became the tail).
    // Single-pass products pair up, interleaved on their own banks and slots, so two short
    // epilogues fill each other's bubbles.
    pending.emplace_back(std::move(t), ni);
    if (pending.size() == 2 || KT > 1) {
      ep.tiles(pending);
      pending.clear();
    }
    ++tile_count;
  };

  ep.prologue();
  std::vector<int64_t> bidx(spec.batch.size(), 0);
  uint64_t a_stream = 0, b_stream = 0, batch = 0;
  while (true) {
    const uint32_t set = static_cast<uint32_t>(batch++ % sets);
    if (plan == Plan::kAResident) {
      for (uint32_t ni = 0; ni < n_tiles; ++ni) {
        const uint32_t bs = static_cast<uint32_t>(b_stream++ % 2);
        load_b(bidx, ni, bs);
        // Every resident A tile first: an epilogue emitted between two tiles' products must
        // not hold up the next tile's transposes on VectorE.
        for (uint32_t mi = 0; mi < m_tiles && ni == 0; ++mi) load_a(bidx, mi, set * m_tiles + mi);
        for (uint32_t mi = 0; mi < m_tiles; ++mi)
          product_tile(bidx, mi, ni, set * m_tiles + mi, bs);
      }
    } else {
      for (uint32_t mi = 0; mi < m_tiles; ++mi) {
        const uint32_t as = static_cast<uint32_t>(a_stream++ % 2);
        load_a(bidx, mi, as);
        for (uint32_t ni = 0; ni < n_tiles; ++ni) {
          uint32_t bs = set * n_tiles + ni;
          if (plan == Plan::kBResident) {
            if (mi == 0) load_b(bidx, ni, bs);
          } else {
            bs = static_cast<uint32_t>(b_stream++ % 2);
            load_b(bidx, ni, bs);
          }
          product_tile(bidx, mi, ni, as, bs);
        }
      }
    }
    size_t d = bidx.size();
    while (d > 0 && ++bidx[d - 1] == spec.batch[d - 1]) bidx[--d] = 0;
    if (d == 0) break;
  }
  if (!pending.empty()) ep.tiles(pending);
  ep.epilogue([](int, uint32_t) -> AccessPattern {
    throw std::invalid_argument("matmul epilogues do not reduce over rows");
  });
  return std::move(b).build();
}

}  // namespace neuronsim::kernels::compiler
