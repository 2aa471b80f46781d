#include "neuronsim/device/instructions.h"

#include <stdexcept>

namespace neuronsim::device::isa {

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
  Instruction in;
  in.op = Opcode::kDmaCopy;
  in.dst = dst;
  in.src0 = src;
  return in;
}

Instruction matmul(const AccessPattern& dst, const AccessPattern& stationary,
                   const AccessPattern& moving, bool accumulate) {
  Instruction in;
  in.op = Opcode::kMatmul;
  in.dst = dst;
  in.src0 = stationary;
  in.src1 = moving;
  in.accumulate = accumulate;
  return in;
}

Instruction transpose(const AccessPattern& dst, const AccessPattern& src) {
  Instruction in;
  in.op = Opcode::kTranspose;
  in.dst = dst;
  in.src0 = src;
  return in;
}

Instruction activation(const AccessPattern& dst, const AccessPattern& src, ActFunc f,
                       ScalarOperand scale, ScalarOperand bias) {
  Instruction in;
  in.op = Opcode::kActivation;
  in.dst = dst;
  in.src0 = src;
  in.func = f;
  in.operand0 = scale;
  in.operand1 = bias;
  return in;
}

Instruction tensor_tensor(const AccessPattern& dst, const AccessPattern& a, const AccessPattern& b,
                          AluOp op) {
  Instruction in;
  in.op = Opcode::kTensorTensor;
  in.dst = dst;
  in.src0 = a;
  in.src1 = b;
  in.alu0 = op;
  return in;
}

Instruction tensor_scalar(const AccessPattern& dst, const AccessPattern& src, AluOp op0,
                          ScalarOperand s0, AluOp op1, ScalarOperand s1) {
  Instruction in;
  in.op = Opcode::kTensorScalar;
  in.dst = dst;
  in.src0 = src;
  in.alu0 = op0;
  in.operand0 = s0;
  in.alu1 = op1;
  in.operand1 = s1;
  return in;
}

Instruction tensor_reduce(const AccessPattern& dst, const AccessPattern& src, ReduceOp op,
                          uint8_t axes) {
  Instruction in;
  in.op = Opcode::kTensorReduce;
  in.dst = dst;
  in.src0 = src;
  in.reduce = op;
  in.reduce_axes = axes;
  return in;
}

Instruction tensor_copy(const AccessPattern& dst, const AccessPattern& src) {
  Instruction in;
  in.op = Opcode::kTensorCopy;
  in.dst = dst;
  in.src0 = src;
  return in;
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
  Instruction in;
  in.op = Opcode::kMemset;
  in.dst = dst;
  in.imm = value;
  return in;
}

Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, const AccessPattern& on_false) {
  Instruction in;
  in.op = Opcode::kSelect;
  in.dst = dst;
  in.src0 = pred;
  in.src1 = on_true;
  in.src2 = on_false;
  in.has_src2 = true;
  return in;
}

Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, float on_false) {
  Instruction in;
  in.op = Opcode::kSelect;
  in.dst = dst;
  in.src0 = pred;
  in.src1 = on_true;
  in.imm = on_false;
  return in;
}

Instruction rng(const AccessPattern& dst, RngDist dist, float a, float b, uint64_t seed,
                uint64_t offset, uint64_t base) {
  Instruction in;
  in.op = Opcode::kRng;
  in.dst = dst;
  in.rng_dist = dist;
  in.imm = a;
  in.imm2 = b;
  in.rng_seed = seed;
  in.rng_offset = offset;
  in.rng_base = base;
  return in;
}

Instruction sem_wait(uint16_t sem, int32_t value) {
  Instruction in;
  in.op = Opcode::kSemWait;
  in.sem = sem;
  in.sem_value = value;
  return in;
}

Instruction sem_signal(uint16_t sem, int32_t value) {
  Instruction in;
  in.op = Opcode::kSemSignal;
  in.sem = sem;
  in.sem_value = value;
  return in;
}

}  // namespace neuronsim::device::isa
