#include "neuronsim/kernels/nll_loss.h"

#include <algorithm>
#include <stdexcept>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

AccessPattern one(const TensorDesc& t, int64_t position) {
  return hbm_ap(t, element_offset(t, position), 1, 0, {{1, 1}});
}

AccessPattern row(uint64_t off, uint32_t n) {
  return isa::sbuf_tile(DType::kFp32, 1, off, n);
}

void check(const NllLossSpec& spec, const TensorDesc* weight) {
  if (weight && spec.weight_pos.size() != spec.self_pos.size())
    throw std::invalid_argument("nll_loss: one weight position per row is required");
  if (spec.reduction < 0 || spec.reduction > 2)
    throw std::invalid_argument("nll_loss: reduction must be 0 (none), 1 (mean) or 2 (sum)");
}

// Gathers rows [r0, r0 + n) of the picked values of src (when given) into x (0 where ignored)
// and their weights into w (1 unweighted, 0 where ignored), one-element DMAs spread over four
// queues; VectorE waits for them all when this returns.
void gather(ProgramBuilder& b, const TensorDesc* src, const TensorDesc* weight,
            const NllLossSpec& spec, size_t r0, uint32_t n, uint64_t x_off, uint64_t w_off,
            Token free) {
  b.wait(kVector, free);
  b.emit(kVector, isa::memset(row(x_off, n), 0.0f));
  b.emit(kVector, isa::memset(row(w_off, n), weight ? 0.0f : 1.0f));
  for (uint32_t j = 0; j < n; ++j) {
    if (!weight && spec.self_pos[r0 + j] < 0)
      b.emit(kVector, isa::memset(row(w_off + j * 4ull, 1), 0.0f));
  }
  const Token cleared = b.mark(kVector);
  for (uint32_t j = 0; j < n; ++j) {
    const int64_t p = spec.self_pos[r0 + j];
    if (p < 0) continue;
    const StreamId q = dma_queue(static_cast<uint8_t>(j % 4));
    b.wait(q, cleared);
    if (src) b.emit(q, isa::dma_copy(row(x_off + j * 4ull, 1), one(*src, p)));
    if (weight)
      b.emit(q, isa::dma_copy(row(w_off + j * 4ull, 1), one(*weight, spec.weight_pos[r0 + j])));
  }
  for (uint8_t q = 0; q < 4; ++q) b.wait(kVector, b.mark(dma_queue(q)));
}

}  // namespace

Program build_nll_loss(const std::string& name, const TensorDesc& self, const TensorDesc* weight,
                       const TensorDesc& out, const TensorDesc& total_weight,
                       const NllLossSpec& spec, const CoreParams& core) {
  check(spec, weight);
  const int64_t rows = static_cast<int64_t>(spec.self_pos.size());
  const bool per_row = spec.reduction == 0 && out.numel() == rows && out.dim() == 1;
  if (!per_row && out.numel() != 1)
    throw std::invalid_argument("nll_loss: the output must be one element or one per row");
  if (total_weight.numel() != 1)
    throw std::invalid_argument("nll_loss: total_weight must be one element");
  ProgramBuilder b(name, core);
  const uint32_t chunk = static_cast<uint32_t>(
      std::clamp<int64_t>(rows, 1, std::min<int64_t>(core.vector.max_free_elements_sbuf, 8192)));
  const uint64_t x_off = b.alloc_sbuf(chunk * 4ull), w_off = b.alloc_sbuf(chunk * 4ull),
                 acc_off = b.alloc_sbuf(4 * 4);
  const AccessPattern loss = row(acc_off, 1), tw = row(acc_off + 4, 1), part = row(acc_off + 8, 1),
                      wpart = row(acc_off + 12, 1);
  b.emit(kVector, isa::memset(row(acc_off, 2), 0.0f));
  Token stored;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint32_t n = static_cast<uint32_t>(std::min<int64_t>(chunk, rows - r0));
    gather(b, &self, weight, spec, static_cast<size_t>(r0), n, x_off, w_off, stored);
    const AccessPattern x = row(x_off, n), w = row(w_off, n);
    // -w * x (ignored rows: 0 * 0).
    b.emit(kVector, isa::tensor_tensor(x, x, w, AluOp::kMultiply));
    b.emit(kVector, isa::tensor_scalar(x, x, AluOp::kMultiply, isa::imm(-1.0f)));
    if (per_row) {
      const StreamId q = dma_queue(0);
      b.wait(q, b.mark(kVector));
      const int64_t stride = out.strides.empty() ? 1 : out.strides[0];
      b.emit(q, isa::dma_copy(hbm_ap(out, element_offset(out, r0), 1, 0, {{stride, n}}), x));
      stored = b.mark(q);
    } else {
      b.emit(kVector, isa::tensor_reduce(part, x, ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_reduce(wpart, w, ReduceOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(loss, loss, part, AluOp::kAdd));
      b.emit(kVector, isa::tensor_tensor(tw, tw, wpart, AluOp::kAdd));
      stored = b.mark(kVector);
    }
  }
  if (per_row) {
    // The CPU kernel leaves total_weight 0 for a per-row output.
    b.wait(kVector, stored);
    b.emit(kVector, isa::memset(tw, 0.0f));
  } else if (spec.reduction == 1) {
    b.emit(kVector, isa::tensor_tensor(loss, loss, tw, AluOp::kDivide));  // 0 / 0: NaN
  }
  const StreamId q = dma_queue(1);
  b.wait(q, b.mark(kVector));
  if (!per_row) b.emit(q, isa::dma_copy(one(out, 0), loss));
  b.emit(q, isa::dma_copy(one(total_weight, 0), tw));
  return std::move(b).build();
}

Program build_nll_loss_backward(const std::string& name, const TensorDesc& grad_output,
                                const TensorDesc* weight, const TensorDesc& total_weight,
                                const TensorDesc& grad_input, const NllLossSpec& spec,
                                const CoreParams& core) {
  check(spec, weight);
  const int64_t rows = static_cast<int64_t>(spec.self_pos.size());
  const bool per_row = spec.reduction == 0 && grad_output.numel() == rows && grad_output.dim() == 1;
  if (!per_row && grad_output.numel() != 1)
    throw std::invalid_argument(
        "nll_loss_backward: grad_output must be one element or one per row");
  ProgramBuilder b(name, core);
  const uint32_t chunk = static_cast<uint32_t>(
      std::clamp<int64_t>(rows, 1, std::min<int64_t>(core.vector.max_free_elements_sbuf, 8192)));
  const uint64_t x_off = b.alloc_sbuf(chunk * 4ull), w_off = b.alloc_sbuf(chunk * 4ull),
                 s_off = b.alloc_sbuf(2 * 4);
  const AccessPattern g = row(s_off, 1), tw = row(s_off + 4, 1);
  // The scalar factor -g (/ total_weight for the mean) when grad_output is one element.
  if (!per_row) {
    b.emit(dma_queue(0), isa::dma_copy(g, one(grad_output, 0)));
    b.emit(dma_queue(0), isa::dma_copy(tw, one(total_weight, 0)));
    b.wait(kVector, b.mark(dma_queue(0)));
    if (spec.reduction == 1) b.emit(kVector, isa::tensor_tensor(g, g, tw, AluOp::kDivide));
  }
  Token stored;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const uint32_t n = static_cast<uint32_t>(std::min<int64_t>(chunk, rows - r0));
    // Per-row grad_output is gathered like the picked values (ignored rows are never stored).
    NllLossSpec rows_spec = spec;
    if (per_row)
      for (int64_t i = 0; i < n; ++i)
        rows_spec.self_pos[r0 + i] = spec.self_pos[r0 + i] < 0 ? -1 : r0 + i;
    gather(b, per_row ? &grad_output : nullptr, weight, rows_spec, static_cast<size_t>(r0), n,
           x_off, w_off, stored);
    const AccessPattern x = row(x_off, n), w = row(w_off, n);
    if (per_row) {
      b.emit(kVector, isa::tensor_tensor(x, x, w, AluOp::kMultiply));
      b.emit(kVector, isa::tensor_scalar(x, x, AluOp::kMultiply, isa::imm(-1.0f)));
    } else {
      b.emit(kVector, isa::tensor_scalar(x, w, AluOp::kMultiply, isa::per_partition(g),
                                         AluOp::kMultiply, isa::imm(-1.0f)));
    }
    const Token computed = b.mark(kVector);
    for (uint32_t j = 0; j < n; ++j) {
      const int64_t p = spec.self_pos[r0 + j];
      if (p < 0) continue;
      const StreamId q = dma_queue(static_cast<uint8_t>(j % 4));
      b.wait(q, computed);
      b.emit(q, isa::dma_copy(one(grad_input, p), row(x_off + j * 4ull, 1)));
    }
    for (uint8_t q = 0; q < 4; ++q) b.wait(kVector, b.mark(dma_queue(q)));
    stored = b.mark(kVector);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
