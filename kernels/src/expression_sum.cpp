#include "neuronsim/kernels/expression_sum.h"

#include <algorithm>
#include <stdexcept>

#include "expr_steps.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tiling.h"
#include "partition_sum.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

Program build_expression_sum(const std::string& name, const std::vector<TensorDesc>& inputs,
                             const Expr& expr, const TensorDesc& out, float scale,
                             const CoreParams& core) {
  if (out.numel() != 1)
    throw std::invalid_argument("expression sum: the output must be one element");
  if (inputs.empty() || expr.steps.empty())
    throw std::invalid_argument("expression sum: needs inputs and at least one step");
  ProgramBuilder pb(name, core);
  const uint32_t P = core.sbuf.partitions;
  std::vector<int64_t> sizes;
  for (const TensorDesc& t : inputs) {
    if (t.sizes.size() > sizes.size()) sizes = t.sizes;
  }
  std::vector<std::vector<int64_t>> strides;
  for (const TensorDesc& t : inputs) strides.push_back(broadcast_strides(t, sizes));
  // Two slots (double buffering) of one fp32 buffer per input and per step.
  const uint64_t buffers = inputs.size() + expr.steps.size();
  const uint64_t budget = core.sbuf.partition_bytes / 2;
  const uint64_t max_free = std::max<uint64_t>(
      1, std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (2 * buffers * 4)));
  const auto tiles = make_tiles(sizes, strides, P, max_free);
  uint64_t tile_free = 1;
  for (const Tile& t : tiles) tile_free = std::max(tile_free, t.free_elements());
  const uint64_t x_off = pb.alloc_sbuf(2 * buffers * tile_free * 4), acc_off = pb.alloc_sbuf(2 * 4),
                 r_off = pb.alloc_sbuf(4);
  const uint64_t bank = pb.alloc_psum_bank();
  const AccessPattern acc = isa::sbuf_tile(DType::kFp32, P, acc_off, 1),
                      r = isa::sbuf_tile(DType::kFp32, 1, r_off, 1);
  pb.emit(kVector, isa::memset(acc, 0.0f));
  // Inputs load on two queues (alternating), so two operands stream side by side.
  auto load_queue = [](size_t i) { return dma_queue(static_cast<uint8_t>(i % 2)); };
  Token slot_free[2];
  for (size_t ti = 0; ti < tiles.size(); ++ti) {
    const Tile& t = tiles[ti];
    const int s = static_cast<int>(ti % 2);
    const uint32_t f = static_cast<uint32_t>(t.free_elements());
    auto buf = [&](uint64_t k) {
      return isa::sbuf_tile(DType::kFp32, t.partitions, x_off + (s * buffers + k) * tile_free * 4,
                            f);
    };
    std::vector<Token> loaded(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const StreamId q = load_queue(i);
      pb.wait(q, slot_free[s]);
      pb.emit(q, isa::dma_copy(buf(i), tile_ap(inputs[i], t, t.operands[i])));
      loaded[i] = pb.mark(q);
    }
    auto tensor_arg = [&](const Arg& a) {
      return buf(a.kind == Arg::kInput ? static_cast<uint64_t>(a.index)
                                       : inputs.size() + static_cast<uint64_t>(a.index));
    };
    std::vector<Token> done(expr.steps.size());
    for (size_t k = 0; k < expr.steps.size(); ++k) {
      const Step& st = expr.steps[k];
      const StreamId e = step_engine(st);
      pb.wait(e, slot_free[s]);  // the sum of two tiles ago has read this slot
      for (const Arg* a : {&st.a, &st.b, &st.c}) {
        if (a->kind == Arg::kInput) pb.wait(e, loaded[a->index]);
        if (a->kind == Arg::kStep) pb.wait(e, done[a->index]);
      }
      emit_step(pb, st, buf(inputs.size() + k), tensor_arg);
      done[k] = pb.mark(e);
    }
    // The tile's values summed per partition into the accumulator.
    const AccessPattern part = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off + 4, 1),
                        acc_p = isa::sbuf_tile(DType::kFp32, t.partitions, acc_off, 1);
    pb.wait(kVector, done.back());
    pb.emit(kVector, isa::tensor_reduce(part, buf(buffers - 1), ReduceOp::kAdd));
    pb.emit(kVector, isa::tensor_tensor(acc_p, acc_p, part, AluOp::kAdd));
    slot_free[s] = pb.mark(kVector);
  }
  emit_partition_sum(pb, acc, bank, r);
  pb.emit(kVector, isa::tensor_scalar(r, r, AluOp::kMultiply, isa::imm(scale)));
  const StreamId qstore = load_queue(0);
  pb.wait(qstore, pb.mark(kVector));
  pb.emit(qstore, isa::dma_copy(hbm_ap(out, 0, 1, 0, {}), r));
  return std::move(pb).build();
}

}  // namespace neuronsim::kernels
