#include "neuronsim/device_model/instructions.h"

#include <stdexcept>

namespace neuronsim::device_model::isa {

AccessPattern sbuf(DType t, uint32_t start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims) {
  AccessPattern ap;
  ap.space = MemSpace::kSbuf;
  ap.dtype = t;
  ap.start_partition = start;
  ap.partitions = partitions;
  ap.offset = offset;
  if (dims.size() > kMaxFreeDims) throw std::invalid_argument("at most 4 free dims");
  for (const Dim& d : dims) ap.dims[ap.ndims++] = d;
  return ap;
}

AccessPattern sbuf_tile(DType t, uint32_t partitions, uint64_t offset, uint32_t free,
                        uint32_t start) {
  return sbuf(t, start, partitions, offset, {{1, free}});
}

AccessPattern psum_tile(DType t, uint32_t partitions, uint64_t offset, uint32_t free,
                        uint32_t start) {
  AccessPattern ap = sbuf_tile(t, partitions, offset, free, start);
  ap.space = MemSpace::kPsum;
  return ap;
}

AccessPattern hbm_rows(DType t, uint64_t address, uint32_t rows, uint32_t cols,
                       int64_t row_stride) {
  AccessPattern ap;
  ap.space = MemSpace::kHbm;
  ap.dtype = t;
  ap.partitions = rows;
  ap.partition_stride = row_stride;
  ap.offset = address;
  ap.ndims = 1;
  ap.dims[0] = {1, cols};
  return ap;
}

AccessPattern slice(AccessPattern ap, uint32_t free_start, uint32_t free_count) {
  if (ap.ndims != 1) throw std::invalid_argument("slice() takes a one-dim free pattern");
  ap.offset += static_cast<uint64_t>(free_start * ap.dims[0].stride) * dtype_size(ap.dtype);
  ap.dims[0].size = free_count;
  return ap;
}

Instruction dma_copy(const AccessPattern& dst, const AccessPattern& src) {
  return {.op = Opcode::kDmaCopy, .dst = dst, .src0 = src};
}

Instruction matmul(const AccessPattern& dst, const AccessPattern& stationary,
                   const AccessPattern& moving, bool accumulate) {
  return {.op = Opcode::kMatmul,
          .dst = dst,
          .src0 = stationary,
          .src1 = moving,
          .accumulate = accumulate};
}

Instruction matmul_double_row(const AccessPattern& dst, const AccessPattern& stationary,
                              const AccessPattern& moving, bool accumulate) {
  Instruction in = matmul(dst, stationary, moving, accumulate);
  in.perf_mode = MatmulPerfMode::kDoubleRow;
  return in;
}

Instruction transpose(const AccessPattern& dst, const AccessPattern& src) {
  return {.op = Opcode::kTranspose, .dst = dst, .src0 = src};
}

Instruction activation(const AccessPattern& dst, const AccessPattern& src, ActFunc f,
                       ScalarOperand scale, ScalarOperand bias) {
  return {.op = Opcode::kActivation,
          .dst = dst,
          .src0 = src,
          .operand0 = scale,
          .operand1 = bias,
          .func = f};
}

Instruction tensor_tensor(const AccessPattern& dst, const AccessPattern& a, const AccessPattern& b,
                          AluOp op) {
  return {.op = Opcode::kTensorTensor, .dst = dst, .src0 = a, .src1 = b, .alu0 = op};
}

Instruction tensor_scalar(const AccessPattern& dst, const AccessPattern& src, AluOp op0,
                          ScalarOperand s0, AluOp op1, ScalarOperand s1) {
  return {.op = Opcode::kTensorScalar,
          .dst = dst,
          .src0 = src,
          .alu0 = op0,
          .alu1 = op1,
          .operand0 = s0,
          .operand1 = s1};
}

Instruction tensor_reduce(const AccessPattern& dst, const AccessPattern& src, ReduceOp op,
                          uint8_t axes) {
  return {.op = Opcode::kTensorReduce, .dst = dst, .src0 = src, .reduce = op, .reduce_axes = axes};
}

Instruction tensor_copy(const AccessPattern& dst, const AccessPattern& src) {
  return {.op = Opcode::kTensorCopy, .dst = dst, .src0 = src};
}

Instruction iota(const AccessPattern& dst, int32_t base, int32_t channel_multiplier,
                 std::initializer_list<int32_t> steps) {
  Instruction in;
  in.op = Opcode::kIota;
  in.dst = dst;
  in.iota_base = base;
  in.iota_channel_multiplier = channel_multiplier;
  size_t k = 0;
  for (int32_t s : steps) {
    if (k < in.iota_steps.size()) in.iota_steps[k++] = s;
  }
  return in;
}

Instruction memset(const AccessPattern& dst, float value) {
  return {.op = Opcode::kMemset, .dst = dst, .imm = value};
}

Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, const AccessPattern& on_false) {
  return {.op = Opcode::kSelect,
          .dst = dst,
          .src0 = pred,
          .src1 = on_true,
          .src2 = on_false,
          .has_src2 = true};
}

Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, float on_false) {
  return {.op = Opcode::kSelect, .dst = dst, .src0 = pred, .src1 = on_true, .imm = on_false};
}

Instruction rng(const AccessPattern& dst, RngDist dist, float a, float b, uint64_t seed,
                uint64_t offset, uint64_t base) {
  return {.op = Opcode::kRng,
          .dst = dst,
          .imm = a,
          .imm2 = b,
          .rng_dist = dist,
          .rng_seed = seed,
          .rng_offset = offset,
          .rng_base = base};
}

Instruction sem_wait(uint16_t sem, int32_t value) {
  return {.op = Opcode::kSemWait, .sem = sem, .sem_value = value};
}

Instruction sem_signal(uint16_t sem, int32_t value) {
  return {.op = Opcode::kSemSignal, .sem = sem, .sem_value = value};
}

}  // namespace neuronsim::device_model::isa
