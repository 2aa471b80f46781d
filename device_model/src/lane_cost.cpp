// Cost of VectorE / ScalarE / GpSimdE instructions (ISA-2.26 "Estimated instruction cost",
// ARCH-v2 VectorE cost model, ARCH-v3 performance modes).
#include <algorithm>

#include "cost_models.h"

namespace neuronsim::device_model {
namespace {

bool is_16bit_float(DType t) {
  return t == DType::kBf16 || t == DType::kFp16;
}

bool in_sbuf(const AccessPattern& ap) {
  return ap.space == MemSpace::kSbuf;
}

// The tensor operands an instruction reads and writes (scalar operands excluded).
template <typename Fn>
void for_each_tensor(const Instruction& in, Fn&& fn) {
  fn(in.dst);
  switch (in.op) {
    case Opcode::kTensorTensor:
      fn(in.src0);
      fn(in.src1);
      break;
    case Opcode::kSelect:
      fn(in.src0);
      fn(in.src1);
      if (in.has_src2) fn(in.src2);
      break;
    case Opcode::kMemset:
    case Opcode::kIota:
    case Opcode::kRng:
      break;
    default:
      fn(in.src0);
      break;
  }
}

}  // namespace

double LaneCostModel::stride_penalty(const Instruction& in) const {
  // ARCH-v2: a minor-dim stride above 16 bytes halves SBUF bandwidth.
  bool strided = false;
  for_each_tensor(in, [&](const AccessPattern& ap) {
    if (in_sbuf(ap) && ap.inner_stride_bytes() > sbuf_.stride_penalty_threshold_bytes)
      strided = true;
  });
  return strided ? sbuf_.stride_penalty_factor : 1.0;
}

double LaneCostModel::vector_cycles(const Instruction& in, double N) const {
  switch (in.op) {
    case Opcode::kTensorTensor: {
      const bool one_psum = in.src0.space == MemSpace::kPsum || in.src1.space == MemSpace::kPsum;
      const bool all16 = is_16bit_float(in.dst.dtype) && is_16bit_float(in.src0.dtype) &&
                         is_16bit_float(in.src1.dtype);
      const bool all_sbuf = in_sbuf(in.src0) && in_sbuf(in.src1) && in_sbuf(in.dst);
      const bool cheap_op =
          in.alu0 == AluOp::kAdd || in.alu0 == AluOp::kSubtract || in.alu0 == AluOp::kMultiply;
      const bool contiguous =
          in.src0.free_contiguous() && in.src1.free_contiguous() && in.dst.free_contiguous();
      // ISA-2.26: N if one input is in PSUM or all-BF16 SBUF add/sub/mul; else 2N.
      double c = (one_psum || (all16 && all_sbuf && cheap_op && contiguous)) ? N : 2 * N;
      // ARCH-v3: 2x for both inputs in SBUF and all tensors BF16/FP16.
      if (all16 && in_sbuf(in.src0) && in_sbuf(in.src1)) c /= p_.perf_mode_tensor_tensor_speedup;
      return c;
    }
    case Opcode::kTensorScalar:
    case Opcode::kTensorCopy: {
      // ARCH-v3 performance mode: 4x SBUF->SBUF 16-bit contiguous; 2x otherwise for 16-bit.
      if (is_16bit_float(in.src0.dtype) && is_16bit_float(in.dst.dtype)) {
        const bool full = in_sbuf(in.src0) && in_sbuf(in.dst) && in.src0.free_contiguous() &&
                          in.dst.free_contiguous();
        return N / (full ? p_.perf_mode_copy_speedup : p_.perf_mode_partial_speedup);
      }
      return N;
    }
    case Opcode::kTensorReduce: {
      // ISA-2.26: N/2 for bf16 in/out add or max, else N.
      const bool half = in.src0.dtype == DType::kBf16 && in.dst.dtype == DType::kBf16 &&
                        (in.reduce == ReduceOp::kAdd || in.reduce == ReduceOp::kMax);
      return half ? N / 2 : N;
    }
    case Opcode::kMemset:
      // ISA-2.26: N/2 for zero in bf16/fp16, else N.
      return (in.imm == 0.0f && is_16bit_float(in.dst.dtype)) ? N / 2 : N;
    case Opcode::kSelect: {
      // ISA-2.26 tensor_copy_predicated: N when the data and predicate are split across
      // SBUF/PSUM, 2N when both are in SBUF.
      const bool split = in.src0.space != in.src1.space;
      return split ? N : 2 * N;
    }
    default:
      return N;
  }
}

ComputeCost LaneCostModel::cost(const Instruction& in, StationaryState) const {
  ComputeCost c;
  c.latency_cycles = p_.pipeline_latency_cycles;
  if (in.is_sync()) return c;
  const bool reads_src0 =
      in.op != Opcode::kMemset && in.op != Opcode::kIota && in.op != Opcode::kRng;
  const double N = static_cast<double>(
      reads_src0 && in.op != Opcode::kSelect ? in.src0.free_elements() : in.dst.free_elements());
  double cycles = 0;
  switch (kind_) {
    case EngineKind::kVector:
      cycles = std::max<double>(p_.min_ii_cycles, vector_cycles(in, N) * stride_penalty(in));
      break;
    case EngineKind::kScalar:
      // ISA-2.26 activation: max(MIN_II, N); activation_reduce adds ~64 (ActReadAccumulator).
      cycles = std::max<double>(p_.min_ii_cycles, N * stride_penalty(in));
      if (in.op == Opcode::kActivation && in.has_acc_dst) cycles += p_.accumulate_cycles;
      break;
    case EngineKind::kGpSimd: {
      // ISA-2.26 iota / affine_select: GPSIMD_START + N. Other GpSimd instructions have no
      // published cost; neuronsim uses the same form with 16-bit types at 2 and 8-bit at 4
      // elements per lane-cycle (ARCH-v2: 16x fp32, 32x fp16, 64x int8 per 512-bit processor).
      const size_t es = dtype_size(in.dst.dtype);
      const double per_cycle = es >= 4 ? 1.0 : (es == 2 ? 2.0 : 4.0);
      // rng: one 32-bit Philox word per lane-cycle, as iota (assumption: no published cost).
      const bool per_element = in.op == Opcode::kIota || in.op == Opcode::kRng;
      cycles = p_.start_cycles + (per_element ? N : N / per_cycle) * stride_penalty(in);
      break;
    }
    default:
      break;
  }
  c.cycles = cycles;
  return c;
}

std::unique_ptr<ComputeCostModel> make_cost_model(EngineKind engine, const CoreParams& core) {
  switch (engine) {
    case EngineKind::kTensor:
      return std::make_unique<TensorCostModel>(core.tensor);
    case EngineKind::kVector:
      return std::make_unique<LaneCostModel>(engine, core.vector, core.sbuf);
    case EngineKind::kScalar:
      return std::make_unique<LaneCostModel>(engine, core.scalar, core.sbuf);
    case EngineKind::kGpSimd:
      return std::make_unique<LaneCostModel>(engine, core.gpsimd, core.sbuf);
    case EngineKind::kDma:
      break;
  }
  return nullptr;
}

}  // namespace neuronsim::device_model
