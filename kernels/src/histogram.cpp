#include "neuronsim/kernels/histogram.h"

#include <algorithm>
#include <stdexcept>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_histogram(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                        const HistogramSpec& spec, const CoreParams& core) {
  if (spec.bins < 1) throw std::invalid_argument("histogram: bins must be positive");
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  // histc counts k >= b per bin edge and one more column, the elements above the range; the
  // bins are differences of neighbouring columns. bincount counts k == b directly.
  const bool histc = spec.range.has_value();
  const uint32_t cols = static_cast<uint32_t>(spec.bins + (histc ? 1 : 0));
  std::vector<std::vector<int64_t>> strides{in.strides};
  if (spec.weights) strides.push_back(spec.weights->strides);
  // SBUF per partition: 2 input slots (+2 weight slots), the bin index, a mask, the tile's
  // counts and the running counts.
  const uint64_t fixed = 2 * uint64_t{cols} * 4 + 4;
  const uint64_t budget = core.sbuf.partition_bytes / 2;
  if (fixed >= budget) throw std::invalid_argument("histogram: too many bins for SBUF");
  const uint64_t tf_max = std::max<uint64_t>(1, (budget - fixed) / (4 * 4 * 2));
  const auto tiles = make_tiles(in.sizes, strides, P, tf_max);
  uint64_t tf = 1;
  for (const Tile& t : tiles) tf = std::max(tf, t.free_elements());
  const uint64_t x_off = b.alloc_sbuf(2 * tf * 4), w_off = b.alloc_sbuf(2 * tf * 4),
                 idx_off = b.alloc_sbuf(tf * 4), mask_off = b.alloc_sbuf(tf * 4),
                 part_off = b.alloc_sbuf(uint64_t{cols} * 4),
                 acc_off = b.alloc_sbuf(uint64_t{cols} * 4), ones_off = b.alloc_sbuf(4);
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, P, acc_off, cols);
  b.emit(kVector, isa::memset(acc, 0.0f));
  b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, P, ones_off, 1), 1.0f));
  const float scale =
      histc ? static_cast<float>(spec.bins) / (spec.range->second - spec.range->first) : 1.0f;
  Token slot_free[2];
  size_t k = 0;
  for (const Tile& t : tiles) {
    const int s = static_cast<int>(k++ % 2);
    const uint32_t fe = static_cast<uint32_t>(t.free_elements());
    const StreamId q = dma_queue(static_cast<uint8_t>(s));
    const AccessPattern x = isa::sbuf_tile(DType::kFp32, t.partitions, x_off + s * tf * 4, fe);
    const AccessPattern w = isa::sbuf_tile(DType::kFp32, t.partitions, w_off + s * tf * 4, fe);
    const AccessPattern idx = isa::sbuf_tile(DType::kFp32, t.partitions, idx_off, fe);
    const AccessPattern mask = isa::sbuf_tile(DType::kFp32, t.partitions, mask_off, fe);
    b.wait(q, slot_free[s]);
    b.emit(q, isa::dma_copy(x, tile_ap(in, t, t.operands[0])));
    if (spec.weights) b.emit(q, isa::dma_copy(w, tile_ap(*spec.weights, t, t.operands[1])));
    b.wait(kVector, b.mark(q));
    // Elements on partitions this tile leaves out must not count: the tile's counts cover only
    // its partitions, added into the running counts' same partitions.
    const AccessPattern part = isa::sbuf_tile(DType::kFp32, t.partitions, part_off, cols);
    if (histc) {  // idx = (x - lo) * bins / (hi - lo): bin b holds b <= idx < b + 1
      b.emit(kVector, isa::tensor_scalar(idx, x, AluOp::kSubtract, isa::imm(spec.range->first),
                                         AluOp::kMultiply, isa::imm(scale)));
    }
    const AccessPattern& key = histc ? idx : x;
    for (uint32_t c = 0; c < cols; ++c) {
      const AccessPattern col = isa::slice(part, c, 1);
      if (histc && c == cols - 1) {  // above the range (hi itself is in the last bin)
        b.emit(kVector, isa::tensor_scalar(mask, x, AluOp::kIsGt, isa::imm(spec.range->second)));
      } else {
        b.emit(kVector, isa::tensor_scalar(mask, key, histc ? AluOp::kIsGe : AluOp::kIsEqual,
                                           isa::imm(static_cast<float>(c))));
      }
      if (spec.weights) b.emit(kVector, isa::tensor_tensor(mask, mask, w, AluOp::kMultiply));
      b.emit(kVector, isa::tensor_reduce(col, mask, ReduceOp::kAdd));
    }
    const AccessPattern acc_p = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off, cols);
    b.emit(kVector, isa::tensor_tensor(acc_p, acc_p, part, AluOp::kAdd));
    slot_free[s] = b.mark(kVector);
  }
  // Sum the partitions on TensorE, a PSUM bank's worth of columns at a time; then the bins.
  const uint32_t chunk = static_cast<uint32_t>(
      std::min<uint64_t>(core.tensor.moving_free_max, core.psum.bank_bytes() / 4));
  const uint64_t bank = b.alloc_psum_bank();
  const uint64_t res_off = b.alloc_sbuf(uint64_t{cols} * 4),
                 edges_off = b.alloc_sbuf(uint64_t{chunk} * 4);
  b.wait(kTensor, b.mark(kVector));
  const StreamId qout = dma_queue(2);
  // histc reads one column past a chunk's bins (the next edge's count).
  const uint32_t step = chunk - (histc ? 1 : 0);
  for (uint32_t c0 = 0; c0 < static_cast<uint32_t>(spec.bins); c0 += step) {
    const uint32_t nb = std::min<uint32_t>(step, static_cast<uint32_t>(spec.bins) - c0);
    const uint32_t nc = nb + (histc ? 1 : 0);
    const AccessPattern sums = isa::psum_tile(DType::kFp32, 1, bank, nc);
    b.emit(kTensor, isa::matmul(sums, isa::sbuf_tile(DType::kFp32, P, ones_off, 1),
                                isa::slice(acc, c0, nc), false));
    b.wait(kVector, b.mark(kTensor));
    const AccessPattern res = isa::slice(isa::sbuf_tile(DType::kFp32, 1, res_off, cols), c0, nb);
    if (histc) {  // TensorE's sums to SBUF (VectorE reads at most one PSUM input), then bins
      const AccessPattern edges = isa::sbuf_tile(DType::kFp32, 1, edges_off, nc);
      b.emit(kVector, isa::tensor_copy(edges, sums));
      b.emit(kVector, isa::tensor_tensor(res, isa::slice(edges, 0, nb), isa::slice(edges, 1, nb),
                                         AluOp::kSubtract));
    } else {
      b.emit(kVector, isa::tensor_copy(res, sums));
    }
    const Token done = b.mark(kVector);
    b.wait(kTensor, done);  // the bank is free again
    b.wait(qout, done);
    b.emit(qout, isa::dma_copy(
                     hbm_ap(out, c0 * out.strides.back(), 1, 0, {{out.strides.back(), nb}}), res));
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
