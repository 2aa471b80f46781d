#include "neuronsim/kernels/membership.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"
#include "partition_sum.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

int64_t max_isin_tests(const CoreParams& core) {
  return static_cast<int64_t>(
      std::min<uint64_t>(core.vector.max_free_elements_sbuf, core.sbuf.partition_bytes / 4 / 4));
}

namespace {

// The test elements as one run of `m` elements per partition (coalesced; at most 4 dims).
AccessPattern tests_ap(const TensorDesc& t, uint32_t partitions) {
  std::vector<int64_t> sizes = t.sizes;
  std::vector<std::vector<int64_t>> strides{t.strides};
  coalesce(sizes, strides);
  if (sizes.size() > static_cast<size_t>(kMaxFreeDims))
    throw std::invalid_argument(fmt::format("isin: test elements {} fold into more than {} dims",
                                            t.to_string(), kMaxFreeDims));
  AccessPattern ap = hbm_ap(t, 0, partitions, 0, {});
  ap.ndims = static_cast<uint8_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d)
    ap.dims[d] = {strides[0][d], static_cast<uint32_t>(sizes[d])};
  return ap;
}

}  // namespace

Program build_isin(const std::string& name, const std::optional<TensorDesc>& elements,
                   float element, const TensorDesc& tests, const TensorDesc& out, bool invert,
                   bool integer, const CoreParams& core) {
  const int64_t m = static_cast<int64_t>(tests.numel());
  if (m > max_isin_tests(core))
    throw std::invalid_argument(
        fmt::format("isin: {} test elements exceed {}", m, max_isin_tests(core)));
  ProgramBuilder b(name, core);
  if (out.numel() == 0) return std::move(b).build();
  const DType cdt = integer ? DType::kInt32 : DType::kFp32;
  const uint32_t P = core.sbuf.partitions;
  const uint32_t mm = static_cast<uint32_t>(std::max<int64_t>(m, 1));
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  if (!elements) {
    // One element against the test row on one partition: compare, then an or-reduction.
    const uint64_t t_off = b.alloc_sbuf(uint64_t{mm} * 4), r_off = b.alloc_sbuf(4);
    const AccessPattern row = isa::sbuf_tile(cdt, 1, t_off, mm),
                        r = isa::sbuf_tile(cdt, 1, r_off, 1);
    if (m == 0) {
      b.emit(kVector, isa::memset(r, invert ? 1.0f : 0.0f));
    } else {
      b.emit(qin, isa::dma_copy(row, tests_ap(tests, 1)));
      b.wait(kVector, b.mark(qin));
      b.emit(kVector, isa::tensor_scalar(row, row, AluOp::kIsEqual, isa::imm(element)));
      b.emit(kVector, isa::tensor_reduce(r, row, ReduceOp::kMax));
      if (invert) b.emit(kVector, isa::tensor_scalar(r, r, AluOp::kIsEqual, isa::imm(0.0f)));
    }
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(hbm_ap(out, 0, 1, 0, {}), r));
    return std::move(b).build();
  }
  const TensorDesc& el = *elements;
  if (el.sizes != out.sizes) throw std::invalid_argument("isin: elements and output sizes differ");
  // Tiles of the elements: the tests row, two slots of element, scratch and result columns.
  const uint64_t budget = core.sbuf.partition_bytes * 3 / 4 - uint64_t{mm} * 4;
  const uint64_t max_free = std::max<uint64_t>(
      1, std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (2 * 3 * 4)));
  const auto tiles =
      make_tiles(out.sizes, {broadcast_strides(el, out.sizes), out.strides}, P, max_free);
  uint64_t tile_free = 1;
  for (const Tile& t : tiles) tile_free = std::max(tile_free, t.free_elements());
  const uint64_t t_off = b.alloc_sbuf(uint64_t{mm} * 4);
  const uint64_t x_off = b.alloc_sbuf(2 * 3 * tile_free * 4);
  if (m > 0) b.emit(qin, isa::dma_copy(isa::sbuf_tile(cdt, P, t_off, mm), tests_ap(tests, P)));
  const Token tests_loaded = b.mark(qin);
  Token slot_free[2];
  for (size_t ti = 0; ti < tiles.size(); ++ti) {
    const Tile& t = tiles[ti];
    const int s = static_cast<int>(ti % 2);
    const uint32_t f = static_cast<uint32_t>(t.free_elements());
    auto buf = [&](int i) {
      return isa::sbuf_tile(cdt, t.partitions, x_off + (s * 3 + i) * tile_free * 4, f);
    };
    const AccessPattern x = buf(0), w = buf(1), acc = buf(2);
    b.wait(qin, slot_free[s]);
    b.emit(qin, isa::dma_copy(x, tile_ap(el, t, t.operands[0])));
    b.wait(kVector, b.mark(qin));
    b.wait(kVector, tests_loaded);
    b.emit(kVector, isa::memset(acc, 0.0f));
    for (uint32_t j = 0; j < static_cast<uint32_t>(m); ++j) {
      const AccessPattern tj = isa::sbuf_tile(cdt, t.partitions, t_off + j * 4, 1);
      b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kIsEqual, isa::per_partition(tj)));
      b.emit(kVector, isa::tensor_tensor(acc, acc, w, AluOp::kLogicalOr));
    }
    if (invert) b.emit(kVector, isa::tensor_scalar(acc, acc, AluOp::kIsEqual, isa::imm(0.0f)));
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(tile_ap(out, t, t.operands[1]), acc));
    slot_free[s] = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_unique_count(const std::string& name, const TensorDesc& in, const TensorDesc& count,
                           const CoreParams& core) {
  const int64_t n = static_cast<int64_t>(in.numel());
  if (n > max_isin_tests(core))
    throw std::invalid_argument(
        fmt::format("unique: {} elements exceed {}", n, max_isin_tests(core)));
  // Evenly spaced elements (contiguous; 64-bit data is described with doubled strides).
  const int64_t step = in.strides.empty() ? 1 : in.strides.back();
  for (int64_t d = 0; d + 1 < in.dim(); ++d) {
    if (in.sizes[d] > 1 && in.strides[d] != in.strides[d + 1] * in.sizes[d + 1])
      throw std::invalid_argument("unique: the input must be contiguous");
  }
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const uint32_t nn = static_cast<uint32_t>(std::max<int64_t>(n, 1));
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  // The row (every element, on every partition), per tile: the element column, the compare
  // and iota rows, and the accumulator of first occurrences.
  const uint64_t row_off = b.alloc_sbuf(uint64_t{nn} * 4), x_off = b.alloc_sbuf(2 * 4),
                 w_off = b.alloc_sbuf(uint64_t{nn} * 4), m_off = b.alloc_sbuf(uint64_t{nn} * 4),
                 acc_off = b.alloc_sbuf(2 * 4), r_off = b.alloc_sbuf(4);
  const uint64_t bank = b.alloc_psum_bank();
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, P, acc_off, 1),
                      r = isa::sbuf_tile(DType::kFp32, 1, r_off, 1);
  b.emit(kVector, isa::memset(acc, 0.0f));
  TensorDesc flat = in;
  flat.sizes = {n};
  flat.strides = {step};
  if (n > 0) {
    b.emit(qin, isa::dma_copy(isa::sbuf_tile(DType::kFp32, P, row_off, nn),
                              hbm_ap(flat, 0, P, 0, {{step, nn}})));
  }
  Token x_free[2];
  int tile = 0;
  for (int64_t i0 = 0; i0 < n; i0 += P, ++tile) {
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, n - i0));
    const int s = tile % 2;
    const AccessPattern x = isa::sbuf_tile(DType::kFp32, p, x_off + s * 4, 1),
                        row = isa::sbuf_tile(DType::kFp32, p, row_off, nn),
                        w = isa::sbuf_tile(DType::kFp32, p, w_off, nn),
                        m = isa::sbuf_tile(DType::kFp32, p, m_off, nn),
                        part = isa::sbuf_tile(DType::kFp32, p, acc_off + 4, 1),
                        acc_p = isa::sbuf_tile(DType::kFp32, p, acc_off, 1);
    b.wait(qin, x_free[s]);
    b.emit(qin, isa::dma_copy(x, hbm_ap(flat, i0 * step, p, step, {{1, 1}})));
    // m = j - i: the earlier elements are m < 0.
    b.wait(kGpSimd, x_free[s]);
    b.emit(kGpSimd, isa::iota(m, static_cast<int32_t>(-i0), -1, {1}));
    b.wait(kVector, b.mark(qin));
    b.wait(kVector, b.mark(kGpSimd));
    b.emit(kVector, isa::tensor_scalar(w, row, AluOp::kIsEqual, isa::per_partition(x)));
    b.emit(kVector, isa::tensor_scalar(m, m, AluOp::kIsLt, isa::imm(0.0f)));
    b.emit(kVector, isa::tensor_tensor(w, w, m, AluOp::kLogicalAnd));
    b.emit(kVector, isa::tensor_reduce(part, w, ReduceOp::kMax));
    b.emit(kVector, isa::tensor_scalar(part, part, AluOp::kIsEqual, isa::imm(0.0f)));
    b.emit(kVector, isa::tensor_tensor(acc_p, acc_p, part, AluOp::kAdd));
    x_free[s] = b.mark(kVector);
  }
  emit_partition_sum(b, acc, bank, r);
  b.wait(qout, b.mark(kVector));
  b.emit(qout, isa::dma_copy(hbm_ap(count, 0, 1, 0, {}), r));
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
