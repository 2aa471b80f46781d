#include "neuronsim/kernels/reduction.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "column_reduce.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

AluOp combine_op(ReduceOp r) {
  switch (r) {
    case ReduceOp::kAdd:
      return AluOp::kAdd;
    case ReduceOp::kMax:
      return AluOp::kMax;
    case ReduceOp::kMin:
      return AluOp::kMin;
    case ReduceOp::kMultiply:
      return AluOp::kMultiply;
  }
  return AluOp::kAdd;
}

namespace {

struct Dims {
  std::vector<int64_t> sizes;
  std::vector<int64_t> in_strides, out_strides;
};

// Sums over dims that lie outside the kept innermost dim in memory (x.sum(0) of a row-major
// matrix: bias gradients, batch sums). Reduced rows go on partitions and TensorE adds them,
// ones^T @ x accumulating in PSUM, so every DMA reads contiguous rows; the generic path would
// gather one element per descriptor.
Program build_column_sum(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                         const ReduceSpec& spec, const std::vector<int64_t>& kept_sizes,
                         const std::vector<std::vector<int64_t>>& ks,
                         const std::vector<int64_t>& red_sizes,
                         const std::vector<int64_t>& red_strides, const CoreParams& core) {
  constexpr int kSlots = 4;
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const int64_t inner = kept_sizes.back();
  const uint32_t F = static_cast<uint32_t>(
      std::min<int64_t>(static_cast<int64_t>(core.tensor.moving_free_max), inner));
  const int64_t r_inner = red_sizes.back(), r_inner_stride = red_strides.back();
  const int64_t r_outer = red_sizes.size() == 2 ? red_sizes[0] : 1;
  const int64_t r_outer_stride = red_sizes.size() == 2 ? red_strides[0] : 0;
  const uint64_t ones_off = b.alloc_sbuf(4);
  const uint64_t x_off = b.alloc_sbuf(kSlots * uint64_t{F} * 4);
  const uint64_t o_off = b.alloc_sbuf(2 * uint64_t{F} * 4);
  const uint64_t banks[2] = {b.alloc_psum_bank(), b.alloc_psum_bank()};
  b.emit(kVector, isa::memset(isa::sbuf_tile(DType::kFp32, P, ones_off, 1), 1.0f));
  b.wait(kTensor, b.mark(kVector));
  const StreamId qout = dma_queue(2);
  Token x_free[kSlots], bank_free[2], o_free[2];
  uint64_t loads = 0, groups = 0;
  for_each_outer_kept(kept_sizes, ks, [&](int64_t in_base, int64_t out_base) {
    for (int64_t f0 = 0; f0 < inner; f0 += F) {
      const uint32_t fw = static_cast<uint32_t>(std::min<int64_t>(F, inner - f0));
      const int g = static_cast<int>(groups++ % 2);
      const AccessPattern acc = isa::psum_tile(DType::kFp32, 1, banks[g], fw);
      b.wait(kTensor, bank_free[g]);
      bool first = true;
      Token summed;
      for (int64_t o = 0; o < r_outer; ++o) {
        for (int64_t i0 = 0; i0 < r_inner; i0 += P) {
          const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, r_inner - i0));
          const int slot = static_cast<int>(loads % kSlots);
          const StreamId q = dma_queue(static_cast<uint8_t>(loads++ % 2));
          const int64_t e = in_base + f0 + o * r_outer_stride + i0 * r_inner_stride;
          const AccessPattern src = hbm_ap(in, e, p, r_inner_stride, {{1, fw}});
          const AccessPattern x =
              isa::sbuf_tile(DType::kFp32, p, x_off + slot * uint64_t{F} * 4, fw);
          b.wait(q, x_free[slot]);
          b.emit(q, isa::dma_copy(x, src));
          b.wait(kTensor, b.mark(q));
          b.emit(kTensor,
                 isa::matmul(acc, isa::sbuf_tile(DType::kFp32, p, ones_off, 1), x, !first));
          summed = b.mark(kTensor);
          x_free[slot] = summed;
          first = false;
        }
      }
      const AccessPattern res = isa::sbuf_tile(DType::kFp32, 1, o_off + g * uint64_t{F} * 4, fw);
      b.wait(kVector, summed);
      b.wait(kVector, o_free[g]);
      b.emit(kVector, isa::tensor_scalar(res, acc, AluOp::kMultiply, isa::imm(spec.scale)));
      bank_free[g] = b.mark(kVector);
      const AccessPattern dst =
          hbm_ap(out, out_base + f0 * ks[1].back(), 1, 0, {{ks[1].back(), fw}});
      b.wait(qout, bank_free[g]);
      b.emit(qout, isa::dma_copy(dst, res));
      o_free[g] = b.mark(qout);
    }
  });
  return std::move(b).build();
}

// max/min/prod over dims that lie outside the kept innermost dim in memory (x.amax(0) of a
// row-major matrix). Each partition takes a run of w contiguous kept columns, the reduced rows
// along its free dim, so every DMA moves runs of w elements; VectorE folds the reduced rows of
// each column (tensor_reduce over the innermost axis of an [w, rows] view). The generic path
// would put the kept dim on partitions and gather one element per descriptor.
Program build_column_reduce(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                            const ReduceSpec& spec, const std::vector<int64_t>& kept_sizes,
                            const std::vector<std::vector<int64_t>>& ks,
                            const std::vector<int64_t>& red_sizes,
                            const std::vector<int64_t>& red_strides, const CoreParams& core) {
  constexpr int kSlots = 2;
  constexpr uint64_t kSlotBytes = 16 << 10;  // per partition: several KiB per DMA row
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const int64_t cols = kept_sizes.back(), out_stride = ks[1].back();
  const int64_t w_max = static_cast<int64_t>(kSlotBytes / 4 / 4);  // leaves >= 4 rows per chunk
  const int64_t W = std::clamp<int64_t>((cols + P - 1) / P, 1, w_max);
  const int64_t r_inner = red_sizes.back(), r_inner_stride = red_strides.back();
  const int64_t r_outer = red_sizes.size() == 2 ? red_sizes[0] : 1;
  const int64_t r_outer_stride = red_sizes.size() == 2 ? red_strides[0] : 0;
  const int64_t rc = std::max<int64_t>(1, static_cast<int64_t>(kSlotBytes / 4) / W);
  const uint64_t x_off = b.alloc_sbuf(kSlots * kSlotBytes);
  const uint64_t part_off = b.alloc_sbuf(uint64_t(W) * 4);
  const uint64_t acc_off = b.alloc_sbuf(2 * uint64_t(W) * 4);
  const StreamId qout = dma_queue(2);
  Token x_free[kSlots], acc_free[2];
  uint64_t loads = 0, blocks = 0;
  for_each_outer_kept(kept_sizes, ks, [&](int64_t in_base, int64_t out_base) {
    for (int64_t c0 = 0; c0 < cols;) {
      // p partitions of w columns each; a tail shorter than W goes on one partition.
      const int64_t w = std::min<int64_t>(W, cols - c0);
      const uint32_t p = w < W ? 1 : static_cast<uint32_t>(std::min<int64_t>(P, (cols - c0) / W));
      const int g = static_cast<int>(blocks++ % 2);
      const AccessPattern acc =
          isa::sbuf_tile(DType::kFp32, p, acc_off + g * uint64_t(W) * 4, static_cast<uint32_t>(w));
      const AccessPattern part =
          isa::sbuf_tile(DType::kFp32, p, part_off, static_cast<uint32_t>(w));
      b.wait(kVector, acc_free[g]);
      bool first = true;
      for (int64_t o = 0; o < r_outer; ++o) {
        for (int64_t r0 = 0; r0 < r_inner; r0 += rc) {
          const int64_t rn = std::min<int64_t>(rc, r_inner - r0);
          const int slot = static_cast<int>(loads % kSlots);
          const StreamId q = dma_queue(static_cast<uint8_t>(loads++ % 2));
          const uint64_t x_at = x_off + slot * kSlotBytes;
          const int64_t e = in_base + c0 + o * r_outer_stride + r0 * r_inner_stride;
          const AccessPattern src = hbm_ap(in, e, p, W, {{r_inner_stride, rn}, {1, w}});
          const AccessPattern x = isa::sbuf(DType::kFp32, 0, p, x_at, {{w, rn}, {1, w}});
          // The same tile read column-major: each column's rows innermost, folded by the reduce.
          const AccessPattern xt = isa::sbuf(DType::kFp32, 0, p, x_at, {{1, w}, {w, rn}});
          b.wait(q, x_free[slot]);
          b.emit(q, isa::dma_copy(x, src));
          b.wait(kVector, b.mark(q));
          b.emit(kVector, isa::tensor_reduce(first ? acc : part, xt, spec.op));
          if (!first) b.emit(kVector, isa::tensor_tensor(acc, acc, part, combine_op(spec.op)));
          first = false;
          x_free[slot] = b.mark(kVector);
        }
      }
      if (spec.scale != 1.0f) {
        b.emit(kVector, isa::tensor_scalar(acc, acc, AluOp::kMultiply, isa::imm(spec.scale)));
      }
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(hbm_ap(out, out_base + c0 * out_stride, p, W * out_stride,
                                        {{out_stride, w}}),
                                 acc));
      acc_free[g] = b.mark(qout);
      c0 += int64_t{p} * w;
    }
  });
  return std::move(b).build();
}

// Reduced dims in memory order (outermost stride first): a value reduction does not depend on
// the order it visits elements in, so a permuted but dense input (a transposed activation, a
// batch_first RNN output) coalesces into one run instead of falling back. Arg reductions keep
// logical order: their index counts positions in it.
void order_by_stride(Dims& red) {
  std::vector<size_t> order(red.sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::abs(red.in_strides[a]) > std::abs(red.in_strides[b]);
  });
  Dims sorted;
  for (size_t i : order) {
    sorted.sizes.push_back(red.sizes[i]);
    sorted.in_strides.push_back(red.in_strides[i]);
    sorted.out_strides.push_back(red.out_strides[i]);
  }
  red = std::move(sorted);
}

}  // namespace

Program build_reduce(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                     const ReduceSpec& spec, const CoreParams& core) {
  if (out.numel() == 0) return Program{name, {}, {}};  // nothing to write
  const int64_t nd = in.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), spec.dims.empty());
  for (int64_t d : spec.dims) reduced.at(static_cast<size_t>(d < 0 ? d + nd : d)) = true;
  // Output strides per input dim (0 on reduced dims); out may keep them as size-1 dims.
  std::vector<int64_t> ostride(static_cast<size_t>(nd), 0);
  {
    size_t o = 0;
    const bool keepdim = out.dim() == nd;
    for (int64_t d = 0; d < nd; ++d) {
      if (reduced[d]) {
        if (keepdim) ++o;
        continue;
      }
      if (o >= out.sizes.size()) throw std::invalid_argument("reduce: output rank does not match");
      ostride[d] = out.strides[o++];
    }
  }
  Dims kept, red;
  for (int64_t d = 0; d < nd; ++d) {
    Dims& t = reduced[d] ? red : kept;
    t.sizes.push_back(in.sizes[d]);
    t.in_strides.push_back(in.strides[d]);
    t.out_strides.push_back(ostride[d]);
  }
  if (!spec.arg) order_by_stride(red);
  std::vector<std::vector<int64_t>> ks{kept.in_strides, kept.out_strides}, rs{red.in_strides};
  coalesce(kept.sizes, ks);
  coalesce(red.sizes, rs);
  if (red.sizes.size() > 2) {
    throw std::invalid_argument(fmt::format("{}: more than two non-adjacent reduced dims", name));
  }
  if (kept.sizes.empty()) {
    kept.sizes = {1};
    ks = {{0}, {0}};
  }
  if (red.sizes.empty()) {
    red.sizes = {1};
    rs = {{0}};
  }
  uint64_t red_total = 1;
  for (int64_t s : red.sizes) red_total *= static_cast<uint64_t>(s);
  int64_t kept_total = 1;
  for (int64_t s : kept.sizes) kept_total *= s;
  // NaN-ignoring sums take the generic path, which zeroes NaN in SBUF before it reduces.
  if (spec.op == ReduceOp::kAdd && !spec.arg && !spec.variance && !spec.nonzero && !spec.sqrt &&
      !spec.ignore_nan && !spec.abs && spec.power == 1.0f && spec.root == 1.0f && red_total > 1 &&
      kept_total > 0 && kept.sizes.back() > 1 && ks[0].back() == 1 && rs[0].back() != 1) {
    return build_column_sum(name, in, out, spec, kept.sizes, ks, red.sizes, rs[0], core);
  }
  // Outer-dim max/min/prod and var/std (Note [Outer-dim reductions], column_reduce.cpp).
  const bool outer_dims = red_total > 1 && kept_total > 0 && kept.sizes.back() > 1 &&
                          ks[0].back() == 1 && rs[0].back() != 1 && !spec.arg && !spec.nonzero &&
                          !spec.ignore_nan && !spec.abs && spec.power == 1.0f && spec.root == 1.0f;
  if (outer_dims && (spec.variance || (spec.op != ReduceOp::kAdd && !spec.sqrt))) {
    const OuterReduce r{kept.sizes, ks, red.sizes, rs[0]};
    if (spec.variance || prefer_transposed_rows(r, core)) {
      return build_transposed_column_reduce(name, in, out, spec, r, core);
    }
    return build_column_reduce(name, in, out, spec, kept.sizes, ks, red.sizes, rs[0], core);
  }

  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t budget = core.sbuf.partition_bytes / 2;
  const uint64_t chunk_cap = std::max<uint64_t>(
      1, std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (4 * 4)));
  // Chunks along the innermost reduced dim; an outer reduced dim is iterated.
  const int64_t inner = red.sizes.back();
  const int64_t outer = red.sizes.size() == 2 ? red.sizes[0] : 1;
  const int64_t chunk = std::min<int64_t>(inner, static_cast<int64_t>(chunk_cap));
  const uint64_t x_off = b.alloc_sbuf(2 * uint64_t(chunk) * 4);
  const uint64_t w_off = b.alloc_sbuf(uint64_t(chunk) * 4);  // scratch (variance, arg)
  const uint64_t i_off = b.alloc_sbuf(uint64_t(chunk) * 4);  // iota (arg)
  const uint64_t acc_off = b.alloc_sbuf(8 * 4);              // acc, partial, mean, idx, tmp
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  const int64_t rows = kept.sizes.back();
  Token x_free[2], acc_free;
  uint64_t load_count = 0;
  auto col = [&](int i, uint32_t p) { return isa::sbuf_tile(DType::kFp32, p, acc_off + i * 4, 1); };
  for_each_outer_kept(kept.sizes, ks, [&](int64_t in_base, int64_t out_base) {
    for (int64_t r0 = 0; r0 < rows; r0 += P) {
      const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, rows - r0));
      const int64_t row_in = in_base + r0 * ks[0].back();
      const int64_t row_out = out_base + r0 * ks[1].back();
      const AccessPattern acc = col(0, p), part = col(1, p), mean = col(2, p), idx = col(3, p),
                          tmp = col(4, p);
      // Columns [c0, c0 + cw) of outer reduced index o, for this tile's rows.
      auto chunk_ap = [&](int64_t o, int64_t c0, uint32_t cw) {
        const int64_t e = row_in + o * (outer > 1 ? rs[0][0] : 0) + c0 * rs[0].back();
        return hbm_ap(in, e, p, ks[0].back(), {{rs[0].back(), cw}});
      };
      b.wait(kVector, acc_free);
      // Pass 0 (variance only): the mean. Pass 1: the reduction proper.
      const int passes = spec.variance ? 2 : 1;
      for (int pass = 0; pass < passes; ++pass) {
        bool first = true;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t c0 = 0; c0 < inner; c0 += chunk) {
            const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, inner - c0));
            const int slot = static_cast<int>(load_count++ % 2);
            const AccessPattern x =
                isa::sbuf_tile(DType::kFp32, p, x_off + slot * uint64_t(chunk) * 4, cw);
            const AccessPattern src = chunk_ap(o, c0, cw);
            b.wait(qin, x_free[slot]);
            b.emit(qin, isa::dma_copy(x, src));
            b.wait(kVector, b.mark(qin));
            const AccessPattern w = isa::sbuf_tile(DType::kFp32, p, w_off, cw);
            if (spec.variance && pass == 1) {
              b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kSubtract, isa::per_partition(mean)));
              b.emit(kVector, isa::tensor_tensor(w, w, w, AluOp::kMultiply));
              b.emit(kVector, isa::tensor_reduce(part, w, ReduceOp::kAdd));
            } else if (spec.arg) {
              // value reduction first; indices are resolved in a second sweep below
              b.emit(kVector, isa::tensor_reduce(part, x, spec.op));
            } else if (spec.nonzero) {
              b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kNotEqual, isa::imm(0.0f)));
              b.emit(kVector, isa::tensor_reduce(part, w, spec.op));
            } else if (spec.ignore_nan) {  // x == x is false only for NaN
              b.emit(kVector, isa::tensor_tensor(w, x, x, AluOp::kIsEqual));
              b.emit(kVector, isa::select(w, w, x, 0.0f));
              b.emit(kVector, isa::tensor_reduce(part, w, spec.op));
            } else if (spec.power == 2.0f) {  // x * x: the sign needs no abs
              b.emit(kVector, isa::tensor_tensor(w, x, x, AluOp::kMultiply));
              b.emit(kVector, isa::tensor_reduce(part, w, spec.op));
            } else if (spec.abs) {
              if (spec.power == 1.0f) {
                b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kAbsMax, isa::imm(0.0f)));
              } else {
                b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kAbsMax, isa::imm(0.0f),
                                                   AluOp::kPow, isa::imm(spec.power)));
              }
              b.emit(kVector, isa::tensor_reduce(part, w, spec.op));
            } else {
              b.emit(kVector,
                     isa::tensor_reduce(part, x, spec.variance ? ReduceOp::kAdd : spec.op));
            }
            if (first)
              b.emit(kVector, isa::tensor_copy(acc, part));
            else
              b.emit(kVector,
                     isa::tensor_tensor(acc, acc, part,
                                        combine_op(spec.variance ? ReduceOp::kAdd : spec.op)));
            first = false;
            x_free[slot] = b.mark(kVector);
          }
        }
        if (first) {
          // Nothing to reduce (an empty reduced dim): the op's identity, as the CPU returns.
          const ReduceOp op = spec.variance ? ReduceOp::kAdd : spec.op;
          const float inf = std::numeric_limits<float>::infinity();
          float identity = op == ReduceOp::kMax ? -inf : inf;
          if (op == ReduceOp::kAdd) identity = 0.0f;
          if (op == ReduceOp::kMultiply) identity = 1.0f;
          if ((spec.nonzero || spec.abs) && (op == ReduceOp::kMax || op == ReduceOp::kMin))
            identity = op == ReduceOp::kMin ? 1.0f : 0.0f;  // all() / any(), |x| >= 0
          b.emit(kVector, isa::memset(acc, identity));
        }
        if (spec.variance && pass == 0) {
          b.emit(kVector, isa::tensor_scalar(mean, acc, AluOp::kMultiply,
                                             isa::imm(1.0f / static_cast<float>(red_total))));
        }
      }
      if (spec.arg) {
        // Second sweep: first index where x == extreme, as min over select(x == m, index, big).
        bool first = true;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t c0 = 0; c0 < inner; c0 += chunk) {
            const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(chunk, inner - c0));
            const int slot = static_cast<int>(load_count++ % 2);
            const AccessPattern x =
                isa::sbuf_tile(DType::kFp32, p, x_off + slot * uint64_t(chunk) * 4, cw);
            const AccessPattern src = chunk_ap(o, c0, cw);
            b.wait(qin, x_free[slot]);
            b.emit(qin, isa::dma_copy(x, src));
            const Token loaded = b.mark(qin);
            const AccessPattern io = isa::sbuf_tile(DType::kFp32, p, i_off, cw);
            b.emit(kGpSimd, isa::iota(isa::sbuf_tile(DType::kFp32, p, i_off, cw),
                                      static_cast<int32_t>(o * inner + c0), 0, {1}));
            const Token iota_done = b.mark(kGpSimd);
            b.wait(kVector, loaded);
            b.wait(kVector, iota_done);
            const AccessPattern w = isa::sbuf_tile(DType::kFp32, p, w_off, cw);
            b.emit(kVector, isa::tensor_scalar(w, x, AluOp::kIsEqual, isa::per_partition(acc)));
            b.emit(kVector, isa::select(w, w, io, 3.0e38f));
            b.emit(kVector, isa::tensor_reduce(part, w, ReduceOp::kMin));
            if (first)
              b.emit(kVector, isa::tensor_copy(idx, part));
            else
              b.emit(kVector, isa::tensor_tensor(idx, idx, part, AluOp::kMin));
            first = false;
            x_free[slot] = b.mark(kVector);
            b.wait(kGpSimd, x_free[slot]);
          }
        }
      }
      const AccessPattern* result = spec.arg ? &idx : &acc;
      if (spec.variance || spec.scale != 1.0f) {
        b.emit(kVector, isa::tensor_scalar(tmp, acc, AluOp::kMultiply, isa::imm(spec.scale)));
        result = &tmp;
      }
      if (spec.root != 1.0f) {
        b.emit(kVector, isa::tensor_scalar(tmp, *result, AluOp::kPow, isa::imm(spec.root)));
        result = &tmp;
      }
      Token ready = b.mark(kVector);
      if (spec.sqrt) {
        b.wait(kScalar, ready);
        b.emit(kScalar, isa::activation(tmp, *result, ActFunc::kSqrt));
        result = &tmp;
        ready = b.mark(kScalar);
      }
      b.wait(qout, ready);
      b.emit(qout, isa::dma_copy(hbm_ap(out, row_out, p, ks[1].back(), {}), *result));
      acc_free = b.mark(qout);
      if (spec.sqrt) b.wait(kScalar, acc_free);
    }
  });
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
