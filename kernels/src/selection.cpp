#include "neuronsim/kernels/selection.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

std::optional<RowView> row_view(const TensorDesc& t, int64_t dim) {
  if (dim < 0 || dim >= std::max<int64_t>(t.dim(), 1)) return std::nullopt;
  RowView v;
  v.n = t.dim() == 0 ? 1 : t.sizes[static_cast<size_t>(dim)];
  v.stride = t.dim() == 0 ? 1 : t.strides[static_cast<size_t>(dim)];
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(1);
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(t.sizes[static_cast<size_t>(d)]);
    strides[0].push_back(t.strides[static_cast<size_t>(d)]);
  }
  coalesce(sizes, strides);
  // Size-1 dims say nothing about the layout.
  std::vector<int64_t> s2, st2;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    s2.push_back(sizes[i]);
    st2.push_back(strides[0][i]);
  }
  if (s2.size() > 1) return std::nullopt;
  v.rows = s2.empty() ? 1 : s2[0];
  v.row_stride = st2.empty() ? 0 : st2[0];
  for (int64_t s : t.sizes) {
    if (s == 0) v.rows = 0;
  }
  return v;
}

namespace {

// Row tile budget: the input row, the available mask, the iota and one scratch row, fp32.
constexpr int kSelectionRows = 4;

RowView checked_view(const TensorDesc& t, int64_t dim, const char* what) {
  const auto v = row_view(t, dim);
  if (!v)
    throw std::invalid_argument(fmt::format("{}: {} does not fold into rows", what, t.to_string()));
  return *v;
}

}  // namespace

int64_t max_selection_length(const CoreParams& core) {
  return static_cast<int64_t>(std::min<uint64_t>(
      core.vector.max_free_elements_sbuf, core.sbuf.partition_bytes / 2 / (kSelectionRows * 4)));
}

int64_t max_scan_length(const CoreParams& core) {
  return static_cast<int64_t>(std::min<uint64_t>(core.vector.max_free_elements_sbuf,
                                                 core.sbuf.partition_bytes / 2 / (4 * 4)));
}

Program build_topk(const std::string& name, const TensorDesc& in, const TensorDesc& values,
                   const TensorDesc& indices, int64_t dim, int64_t k, bool largest,
                   const CoreParams& core) {
  const RowView x = checked_view(in, dim, "topk");
  const RowView vo = checked_view(values, dim, "topk"), io = checked_view(indices, dim, "topk");
  if (k < 0 || k > x.n) throw std::invalid_argument(fmt::format("topk: k = {} of {}", k, x.n));
  if (x.n > max_selection_length(core))
    throw std::invalid_argument(
        fmt::format("topk: {} elements per row exceed {}", x.n, max_selection_length(core)));
  ProgramBuilder b(name, core);
  if (x.rows == 0 || k == 0) return std::move(b).build();
  const uint32_t P = core.sbuf.partitions;
  const uint32_t n = static_cast<uint32_t>(x.n), kk = static_cast<uint32_t>(k);
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t(n) * 4), avail_off = b.alloc_sbuf(n * 4),
                 iota_off = b.alloc_sbuf(n * 4), w_off = b.alloc_sbuf(n * 4),
                 val_off = b.alloc_sbuf(2 * uint64_t(kk) * 4),
                 idx_off = b.alloc_sbuf(2 * uint64_t(kk) * 4);
  const float worst =
      largest ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const ReduceOp extreme = largest ? ReduceOp::kMax : ReduceOp::kMin;
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  // Element indices along the row, the same for every tile.
  const AccessPattern iota = isa::sbuf_tile(DType::kFp32, P, iota_off, n);
  b.emit(kGpSimd, isa::iota(iota, 0, 0, {1}));
  b.wait(kVector, b.mark(kGpSimd));
  Token x_free[2], out_free[2];
  int tile = 0;
  for (int64_t r0 = 0; r0 < x.rows; r0 += P, ++tile) {
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, x.rows - r0));
    const int s = tile % 2;
    const AccessPattern xt = isa::sbuf_tile(DType::kFp32, p, x_off + s * uint64_t(n) * 4, n);
    b.wait(qin, x_free[s]);
    b.emit(qin, isa::dma_copy(xt, hbm_ap(in, r0 * x.row_stride, p, x.row_stride, {{x.stride, n}})));
    b.wait(kVector, b.mark(qin));
    b.wait(kVector, out_free[s]);
    const AccessPattern avail = isa::sbuf_tile(DType::kFp32, p, avail_off, n),
                        w = isa::sbuf_tile(DType::kFp32, p, w_off, n),
                        it = isa::sbuf_tile(DType::kFp32, p, iota_off, n);
    b.emit(kVector, isa::memset(avail, 1.0f));
    for (uint32_t j = 0; j < kk; ++j) {
      const AccessPattern vj = isa::sbuf_tile(DType::kFp32, p, val_off + (s * kk + j) * 4, 1),
                          ij = isa::sbuf_tile(DType::kFp32, p, idx_off + (s * kk + j) * 4, 1);
      // The extreme of the available elements, then the first available index holding it.
      b.emit(kVector, isa::select(w, avail, xt, worst));
      b.emit(kVector, isa::tensor_reduce(vj, w, extreme));
      b.emit(kVector, isa::tensor_scalar(w, w, AluOp::kIsEqual, isa::per_partition(vj)));
      b.emit(kVector, isa::tensor_tensor(w, w, avail, AluOp::kLogicalAnd));
      b.emit(kVector, isa::select(w, w, it, 3.0e38f));
      b.emit(kVector, isa::tensor_reduce(ij, w, ReduceOp::kMin));
      // Taken: avail &= (index != picked).
      b.emit(kVector, isa::tensor_scalar(w, it, AluOp::kNotEqual, isa::per_partition(ij)));
      b.emit(kVector, isa::tensor_tensor(avail, avail, w, AluOp::kLogicalAnd));
    }
    x_free[s] = b.mark(kVector);
    b.wait(qout, x_free[s]);
    b.emit(qout,
           isa::dma_copy(hbm_ap(values, r0 * vo.row_stride, p, vo.row_stride, {{vo.stride, kk}}),
                         isa::sbuf_tile(DType::kFp32, p, val_off + s * kk * 4, kk)));
    b.emit(qout,
           isa::dma_copy(hbm_ap(indices, r0 * io.row_stride, p, io.row_stride, {{io.stride, kk}}),
                         isa::sbuf_tile(DType::kFp32, p, idx_off + s * kk * 4, kk)));
    out_free[s] = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_scan(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                   int64_t dim, bool product, const CoreParams& core) {
  const RowView x = checked_view(in, dim, "scan"), o = checked_view(out, dim, "scan");
  if (x.n > max_scan_length(core))
    throw std::invalid_argument(
        fmt::format("scan: {} elements per row exceed {}", x.n, max_scan_length(core)));
  ProgramBuilder b(name, core);
  if (x.rows == 0 || x.n == 0) return std::move(b).build();
  const uint32_t P = core.sbuf.partitions;
  const uint32_t n = static_cast<uint32_t>(x.n);
  const DType cdt =
      in.dtype == DType::kInt32 && out.dtype == DType::kInt32 ? DType::kInt32 : DType::kFp32;
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t(n) * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  const AluOp op = product ? AluOp::kMultiply : AluOp::kAdd;
  Token x_free[2];
  int tile = 0;
  for (int64_t r0 = 0; r0 < x.rows; r0 += P, ++tile) {
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, x.rows - r0));
    const int s = tile % 2;
    const uint64_t base = x_off + s * uint64_t(n) * 4;
    b.wait(qin, x_free[s]);
    b.emit(qin, isa::dma_copy(isa::sbuf_tile(cdt, p, base, n),
                              hbm_ap(in, r0 * x.row_stride, p, x.row_stride, {{x.stride, n}})));
    b.wait(kVector, b.mark(qin));
    // In place, column by column: x[:, j] = x[:, j - 1] op x[:, j].
    for (uint32_t j = 1; j < n; ++j) {
      const AccessPattern prev = isa::sbuf_tile(cdt, p, base + (j - 1) * 4, 1),
                          cur = isa::sbuf_tile(cdt, p, base + j * 4, 1);
      b.emit(kVector, isa::tensor_tensor(cur, prev, cur, op));
    }
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(hbm_ap(out, r0 * o.row_stride, p, o.row_stride, {{o.stride, n}}),
                               isa::sbuf_tile(cdt, p, base, n)));
    x_free[s] = b.mark(qout);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
