#include "neuronsim/kernels/unfold.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "conv_band.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;

bool unfold_backward_fits(const UnfoldShape& s, const CoreParams& core) {
  if (s.outer < 0 || s.length < 0 || s.inner < 0 || s.windows < 0 || s.size < 1 || s.step < 1)
    return false;
  if (s.windows > 0 && (s.windows - 1) * s.step + s.size > s.length) return false;
  const int64_t out = s.length * s.inner, win = s.windows * s.inner * s.size;
  const int64_t limit = static_cast<int64_t>(core.vector.max_free_elements_sbuf);
  return out <= limit && win <= limit &&
         (out + win) * 4 + 128 <= static_cast<int64_t>(core.sbuf.partition_bytes * 3 / 4);
}

Program build_unfold_backward(const std::string& name, const TensorDesc& grad_in,
                              const std::array<int64_t, 4>& gs, const TensorDesc& grad_input,
                              const UnfoldShape& s, const CoreParams& core) {
  if (!unfold_backward_fits(s, core)) {
    throw std::invalid_argument(
        fmt::format("{}: [{}, {}, {}] with {} windows of {} (step {}) not supported", name, s.outer,
                    s.length, s.inner, s.windows, s.size, s.step));
  }
  if (!grad_input.contiguous() ||
      static_cast<int64_t>(grad_input.numel()) != s.outer * s.length * s.inner) {
    throw std::invalid_argument(
        fmt::format("{}: grad_input {} must be contiguous", name, grad_input.to_string()));
  }
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const int64_t out_n = s.length * s.inner, win_n = s.windows * s.inner * s.size;
  const uint64_t out_off = b.alloc_sbuf(static_cast<uint64_t>(std::max<int64_t>(out_n, 1)) * 4),
                 win_off = b.alloc_sbuf(static_cast<uint64_t>(std::max<int64_t>(win_n, 1)) * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  ProgramBuilder::Token free_all;
  for (int64_t r0 = 0; r0 < s.outer; r0 += P) {
    const uint32_t p = u32(std::min<int64_t>(P, s.outer - r0));
    const AccessPattern out =
        isa::sbuf_tile(DType::kFp32, p, out_off, u32(std::max<int64_t>(out_n, 1)));
    b.wait(kVector, free_all);
    b.emit(kVector, isa::memset(out, 0.0f));
    if (win_n > 0) {
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(
                      isa::sbuf_tile(DType::kFp32, p, win_off, u32(win_n)),
                      conv::with_dims(
                          hbm_ap(grad_in, r0 * gs[0], p, gs[0], {}),
                          {{gs[1], u32(s.windows)}, {gs[2], u32(s.inner)}, {gs[3], u32(s.size)}})));
      b.wait(kVector, b.mark(qin));
      for (int64_t j = 0; j < s.size; ++j) {
        const AccessPattern into =
            conv::sbuf_ap(DType::kFp32, 0, p, out_off + j * s.inner * 4,
                          {{s.step * s.inner, u32(s.windows)}, {1, u32(s.inner)}});
        const AccessPattern from =
            conv::sbuf_ap(DType::kFp32, 0, p, win_off + j * 4,
                          {{s.inner * s.size, u32(s.windows)}, {s.size, u32(s.inner)}});
        b.emit(kVector, isa::tensor_tensor(into, into, from, AluOp::kAdd));
      }
    }
    if (out_n > 0) {
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(hbm_ap(grad_input, r0 * out_n, p, out_n, {{1, u32(out_n)}}), out));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
