#include "neuronsim/kernels/indexing.h"

#include <algorithm>
#include <stdexcept>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

int64_t element_offset(const TensorDesc& t, int64_t pos) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t s = t.sizes[d];
    off += (pos % s) * t.strides[d];
    pos /= s;
  }
  return off;
}

namespace {

struct Run {
  int64_t src, dst, len;  // element offsets and length
};

AccessPattern run_ap(const TensorDesc& t, int64_t offset, int64_t len) {
  return hbm_ap(t, offset, 1, 0, {{1, static_cast<uint32_t>(len)}});
}

// Groups element pairs into contiguous runs (consecutive on both sides, unit inner strides).
std::vector<Run> make_runs(const TensorDesc* src, const std::vector<int64_t>* src_pos,
                           const TensorDesc& dst, const std::vector<int64_t>& dst_pos,
                           int64_t max_run) {
  const int64_t src_inner = !src || src->strides.empty() ? 1 : src->strides.back();
  const int64_t dst_inner = dst.strides.empty() ? 1 : dst.strides.back();
  std::vector<Run> runs;
  for (size_t i = 0; i < dst_pos.size(); ++i) {
    const int64_t so = src ? element_offset(*src, (*src_pos)[i]) : 0;
    const int64_t d = element_offset(dst, dst_pos[i]);
    if (!runs.empty()) {
      Run& r = runs.back();
      const bool src_next = !src || so == r.src + r.len;
      if (src_next && d == r.dst + r.len && src_inner == 1 && dst_inner == 1 && r.len < max_run) {
        ++r.len;
        continue;
      }
    }
    runs.push_back({so, d, 1});
  }
  return runs;
}

}  // namespace

Program build_indexed_fill(const std::string& name, const TensorDesc& dst,
                           const std::vector<int64_t>& dst_pos, float value,
                           const CoreParams& core) {
  const auto runs = make_runs(nullptr, nullptr, dst, dst_pos,
                              static_cast<int64_t>(core.vector.max_free_elements_sbuf));
  ProgramBuilder b(name, core);
  int64_t widest = 1;
  for (const Run& r : runs) widest = std::max(widest, r.len);
  const uint64_t off = b.alloc_sbuf(static_cast<uint64_t>(widest) * 4);
  b.emit(kVector,
         isa::memset(isa::sbuf_tile(DType::kFp32, 1, off, static_cast<uint32_t>(widest)), value));
  const Token filled = b.mark(kVector);
  for (const Run& r : runs) {
    const StreamId q = dma_queue(static_cast<uint8_t>((r.dst / std::max<int64_t>(1, r.len)) % 4));
    b.wait(q, filled);
    b.emit(q, isa::dma_copy(run_ap(dst, r.dst, r.len),
                            isa::sbuf_tile(DType::kFp32, 1, off, static_cast<uint32_t>(r.len))));
  }
  return std::move(b).build();
}

Program build_indexed_copy(const std::string& name, const TensorDesc& src,
                           const std::vector<int64_t>& src_pos, const TensorDesc& dst,
                           const std::vector<int64_t>& dst_pos, bool accumulate,
                           const CoreParams& core, float scale, AluOp combine) {
  if (src_pos.size() != dst_pos.size())
    throw std::invalid_argument("indexed copy: position counts differ");
  // An accumulating run is read into two fp32 SBUF buffers: at most half a partition each
  // (consecutive indices, e.g. position embeddings, make runs of many rows).
  int64_t max_run = static_cast<int64_t>(core.vector.max_free_elements_sbuf);
  if (accumulate) max_run = std::min<int64_t>(max_run, core.sbuf.partition_bytes / (2 * 4));
  const auto runs = make_runs(&src, &src_pos, dst, dst_pos, max_run);
  ProgramBuilder b(name, core);
  if (!accumulate) {
    // Plain moves spread over four queues (no ordering needed unless destinations repeat; the
    // last write wins as on the host only if repeats stay on one queue: keep a queue per dst).
    for (const Run& r : runs) {
      const uint8_t q = static_cast<uint8_t>((r.dst / std::max<int64_t>(1, r.len)) % 4);
      b.emit(dma_queue(q), isa::dma_copy(run_ap(dst, r.dst, r.len), run_ap(src, r.src, r.len)));
    }
    return std::move(b).build();
  }
  int64_t widest = 1;
  for (const Run& r : runs) widest = std::max(widest, r.len);
  const uint64_t a_off = b.alloc_sbuf(static_cast<uint64_t>(widest) * 4);
  const uint64_t s_off = b.alloc_sbuf(static_cast<uint64_t>(widest) * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token stored;
  for (const Run& r : runs) {
    const uint32_t n = static_cast<uint32_t>(r.len);
    const AccessPattern acc = isa::sbuf_tile(DType::kFp32, 1, a_off, n),
                        add = isa::sbuf_tile(DType::kFp32, 1, s_off, n);
    b.wait(qin, stored);  // read-modify-write in order
    b.emit(qin, isa::dma_copy(acc, run_ap(dst, r.dst, r.len)));
    b.emit(qin, isa::dma_copy(add, run_ap(src, r.src, r.len)));
    b.wait(kVector, b.mark(qin));
    if (scale != 1.0f)
      b.emit(kVector, isa::tensor_scalar(add, add, AluOp::kMultiply, isa::imm(scale)));
    b.emit(kVector, isa::tensor_tensor(acc, acc, add, combine));
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(run_ap(dst, r.dst, r.len), acc));
    stored = b.mark(qout);
    b.wait(kVector, stored);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
