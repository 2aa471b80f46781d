// TensorE cost models: NeuronCore mode (ARCH-v2 "Performance Consideration", ISA-2.26) and the
// SCALE-Sim v2 weight-stationary fold model.
#include <algorithm>
#include <cmath>

#include "cost_models.h"

namespace neuronsim::device_model {
namespace {

double dtype_factor(const TensorEngineParams& t, DType a, DType b) {
  if (a == DType::kFp32 || b == DType::kFp32) return t.fp32_cost_factor;  // "roughly 4x"
  if (is_fp8(a) && is_fp8(b)) return t.fp8_cost_factor;
  return 1.0;  // bf16/fp16 (and mixed fp8 x bf16, "runs at BF16 speed")
}

}  // namespace

ComputeCost TensorCostModel::cost(const Instruction& in, StationaryState stationary) const {
  ComputeCost c;
  c.latency_cycles = p_.pipeline_latency_cycles;
  if (in.op == Opcode::kTranspose) {
    // ISA-2.26 nc_transpose on TensorE: max(P, min(64, F)).
    const double P = in.src0.partitions;
    const double F = static_cast<double>(in.src0.free_elements());
    c.cycles = std::max(P, std::min<double>(p_.transpose_min_cycles, F));
    return c;
  }
  if (in.op != Opcode::kMatmul) return c;
  // Double row (ARCH-v3): the row pair is the operands' outermost free dim; it doubles the
  // contraction, not the stationary or moving size.
  const bool dr = in.perf_mode == MatmulPerfMode::kDoubleRow;
  const double rows = dr ? 2.0 : 1.0;
  const double K = in.src0.partitions * rows;
  const double M = static_cast<double>(in.src0.free_elements()) / rows;
  const double N = static_cast<double>(in.src1.free_elements()) / rows;
  c.flops = 2.0 * K * M * N;
  if (p_.timing_mode == TensorTimingMode::kScaleSim) {
    // SCALE-Sim WS (systolic_compute_ws.py): a fold loads its weights (R cycles), streams its
    // T rows, drains (C - 1) and skews (R - 1), 2R + C + T - 2 cycles with R x C the whole
    // array, folds one after the other. A matmul with a new stationary starts a fold; one that
    // reuses it streams N more rows of the same fold. SCALE-Sim's Total Cycles is the last
    // output's cycle index + 1, one less than the sum of its fold lengths: the first fold is one
    // cycle shorter.
    c.cycles = N;
    if (stationary.load) c.cycles += 2.0 * p_.rows + p_.columns - 2.0;
    if (stationary.first) c.cycles -= 1.0;
    return c;
  }
  // ARCH-v3: a double-row FP8 matmul takes the time of the regular BF16 LS/MM sequence with a
  // 128 contraction (tensor.fp8_double_row_cost_factor relative to it).
  const double f =
      dr ? p_.fp8_double_row_cost_factor : dtype_factor(p_, in.src0.dtype, in.src1.dtype);
  // ISA-2.26 nc_matmul: max(min(64, N_stationary), N_moving) cycles, x4 for fp32.
  c.cycles = std::max(std::min<double>(p_.mm_min_ii_cycles, M), N) * f;
  // ARCH-v2 fast LoadStationary: up to 4x faster than a MultiplyMoving of the same free size;
  // it runs in the background of the previous MultiplyMoving.
  if (stationary.load) c.load_stationary_cycles = std::ceil(M / p_.load_stationary_speedup) * f;
  return c;
}

}  // namespace neuronsim::device_model
