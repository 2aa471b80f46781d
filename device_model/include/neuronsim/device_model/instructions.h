#pragma once
// Factories for instructions and access patterns: the readable way to write programs in C++
// (kernels, tests, benchmarks). Each returns a plain Instruction / AccessPattern.
#include <initializer_list>

#include "neuronsim/device_model/isa.h"

namespace neuronsim::device_model::isa {

// ---- access patterns ----
/// [partitions, dims...] in SBUF starting at `start` partition, `offset` bytes into each.
AccessPattern sbuf(DType t, uint32_t start, uint32_t partitions, uint64_t offset,
                   std::initializer_list<Dim> dims);
/// A contiguous [partitions, free] SBUF tile.
AccessPattern sbuf_tile(DType t, uint32_t partitions, uint64_t offset, uint32_t free,
                        uint32_t start = 0);
/// A contiguous [partitions, free] PSUM tile.
AccessPattern psum_tile(DType t, uint32_t partitions, uint64_t offset, uint32_t free,
                        uint32_t start = 0);
/// Rows x cols of a row-major HBM matrix whose rows are `row_stride` elements apart; the rows
/// map to partitions. `row_stride` 0 repeats (broadcasts) one row to every partition.
AccessPattern hbm_rows(DType t, uint64_t address, uint32_t rows, uint32_t cols, int64_t row_stride);
/// Selects [p0, p0 + n) of the partitions and [f0, f0 + m) of a one-dim free range.
AccessPattern slice(AccessPattern ap, uint32_t free_start, uint32_t free_count);

// ---- instructions ----
Instruction dma_copy(const AccessPattern& dst, const AccessPattern& src);
Instruction matmul(const AccessPattern& dst_psum, const AccessPattern& stationary,
                   const AccessPattern& moving, bool accumulate);
/// ARCH-v3 double-row FP8 matmul: stationary [P, 2, M], moving [P, 2, N] (row pair outermost),
/// contracting 2P rows into dst [M, N].
Instruction matmul_double_row(const AccessPattern& dst_psum, const AccessPattern& stationary,
                              const AccessPattern& moving, bool accumulate);
Instruction transpose(const AccessPattern& dst_psum, const AccessPattern& src);
Instruction activation(const AccessPattern& dst, const AccessPattern& src, ActFunc f,
                       ScalarOperand scale = {false, 1.0f, {}}, ScalarOperand bias = {});
Instruction tensor_tensor(const AccessPattern& dst, const AccessPattern& a, const AccessPattern& b,
                          AluOp op);
Instruction tensor_scalar(const AccessPattern& dst, const AccessPattern& src, AluOp op0,
                          ScalarOperand s0, AluOp op1 = AluOp::kBypass, ScalarOperand s1 = {});
Instruction tensor_reduce(const AccessPattern& dst, const AccessPattern& src, ReduceOp op,
                          uint8_t axes = 1);
Instruction tensor_copy(const AccessPattern& dst, const AccessPattern& src);
Instruction iota(const AccessPattern& dst, int32_t base, int32_t channel_multiplier,
                 std::initializer_list<int32_t> steps);
Instruction memset(const AccessPattern& dst, float value);
Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, const AccessPattern& on_false);
Instruction select(const AccessPattern& dst, const AccessPattern& pred,
                   const AccessPattern& on_true, float on_false);
Instruction rng(const AccessPattern& dst, RngDist dist, float a, float b, uint64_t seed,
                uint64_t offset, uint64_t base);
Instruction sem_wait(uint16_t sem, int32_t value);
Instruction sem_signal(uint16_t sem, int32_t value = 1);

inline ScalarOperand imm(float v) {
  return {false, v, {}};
}
inline ScalarOperand per_partition(const AccessPattern& ap) {
  return {true, 0.0f, ap};
}

}  // namespace neuronsim::device_model::isa
