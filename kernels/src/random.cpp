#include "neuronsim/kernels/random.h"

#include <algorithm>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_random(const std::string& name, const TensorDesc& out, const RandomSpec& spec,
                     const CoreParams& core) {
  ProgramBuilder b(name, core);
  // Operands for the tiler: out, then logical positions (a contiguous view), then p / input / mask.
  std::vector<std::vector<int64_t>> strides{out.strides};
  std::vector<int64_t> contiguous(out.sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(out.sizes.size()) - 2; d >= 0; --d) {
    contiguous[d] = contiguous[d + 1] * out.sizes[d + 1];
  }
  strides.push_back(contiguous);
  if (spec.p_tensor) strides.push_back(broadcast_strides(*spec.p_tensor, out.sizes));
  if (spec.dropout_input) strides.push_back(broadcast_strides(*spec.dropout_input, out.sizes));
  if (spec.dropout_mask) strides.push_back(spec.dropout_mask->strides);
  const uint64_t budget = core.sbuf.partition_bytes / 2;
  const auto tiles = make_tiles(out.sizes, strides, core.sbuf.partitions,
                                std::max<uint64_t>(1, budget / (2 * 3 * 4)));
  uint64_t tf = 1;
  for (const Tile& t : tiles) tf = std::max(tf, t.free_elements());
  const uint64_t u_off = b.alloc_sbuf(2 * tf * 4), p_off = b.alloc_sbuf(2 * tf * 4),
                 o_off = b.alloc_sbuf(2 * tf * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Token slot_free[2];
  size_t k = 0;
  for (const Tile& t : tiles) {
    const int s = static_cast<int>(k++ % 2);
    auto tile = [&](uint64_t base) {
      return isa::sbuf(DType::kFp32, 0, t.partitions, base + s * tf * 4,
                       {{1, static_cast<uint32_t>(t.free_elements())}});
    };
    const AccessPattern u = tile(u_off), pt = tile(p_off), o = tile(o_off);
    // The tile's first logical element; within a tile of a contiguous output the elements follow
    // in order.
    const uint64_t base = static_cast<uint64_t>(t.operands[1].offset);
    const bool thresholded = spec.p || spec.p_tensor || spec.dropout_input;
    const bool uniform_first = thresholded || spec.exponential;
    const RngDist dist = uniform_first ? RngDist::kUniform : spec.dist;
    const float a = uniform_first ? 0.0f : spec.a, bb = uniform_first ? 1.0f : spec.b;
    b.wait(kGpSimd, slot_free[s]);
    b.emit(kGpSimd, isa::rng(uniform_first ? u : o, dist, a, bb, spec.seed, spec.offset, base));
    Token ready = b.mark(kGpSimd);
    size_t op = 2;
    if (spec.exponential) {
      b.wait(kScalar, ready);
      b.wait(kScalar, slot_free[s]);
      b.emit(kScalar, isa::activation(o, u, ActFunc::kLog, isa::imm(-1.0f), isa::imm(1.0f)));
      b.wait(kVector, b.mark(kScalar));
      b.emit(kVector,
             isa::tensor_scalar(o, o, AluOp::kMultiply, isa::imm(-1.0f / *spec.exponential)));
      ready = b.mark(kVector);
    }
    if (thresholded) {
      b.wait(kVector, ready);
      b.wait(kVector, slot_free[s]);
      if (spec.p_tensor) {
        b.wait(qin, slot_free[s]);
        b.emit(qin, isa::dma_copy(pt, tile_ap(*spec.p_tensor, t, t.operands[op++])));
        b.wait(kVector, b.mark(qin));
        b.emit(kVector, isa::tensor_tensor(o, u, pt, AluOp::kIsLt));
      } else {
        b.emit(kVector, isa::tensor_scalar(o, u, AluOp::kIsLt, isa::imm(*spec.p)));
      }
      if (spec.dropout_input) {
        // mask first, then output = input * mask / keep
        b.wait(qout, b.mark(kVector));
        b.emit(qout, isa::dma_copy(tile_ap(*spec.dropout_mask, t, t.operands[op + 1]), o));
        b.wait(qin, slot_free[s]);
        b.emit(qin, isa::dma_copy(pt, tile_ap(*spec.dropout_input, t, t.operands[op])));
        b.wait(kVector, b.mark(qin));
        b.emit(kVector, isa::tensor_tensor(o, o, pt, AluOp::kMultiply));
        b.emit(kVector, isa::tensor_scalar(o, o, AluOp::kMultiply, isa::imm(1.0f / *spec.p)));
      }
      ready = b.mark(kVector);
    }
    b.wait(qout, ready);
    b.emit(qout, isa::dma_copy(tile_ap(out, t, t.operands[0]), o));
    slot_free[s] = b.mark(qout);
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
