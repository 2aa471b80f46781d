#pragma once
// The neuronsim instruction set, modelled on the NKI ISA families (device_model/docs/ISA.md is
// the reference). One Instruction struct serves every opcode; ISA.md lists which fields each
// opcode reads.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/device_model/engines.h"

namespace neuronsim::device_model {

/// "tensor", "vector", "scalar", "gpsimd", "dma" (engines.h)
std::string_view engine_kind_name(EngineKind e);
/// Trace row names as the Neuron profiler shows them: "TensorE", "VectorE", ... (engines.h)
std::string_view engine_display_name(EngineKind e);

enum class Opcode : uint8_t {
  // Compute.
  kMatmul,
  kTranspose,
  kActivation,
  kTensorTensor,
  kTensorScalar,
  kTensorReduce,
  kTensorCopy,
  kIota,
  kMemset,
  kSelect,
  // Data movement and synchronisation.
  kDmaCopy,
  kSemWait,
  kSemSignal,
  // Random numbers (GpSimdE).
  kRng,
};
inline constexpr int kOpcodeCount = 14;

std::string_view opcode_name(Opcode op);
std::optional<Opcode> parse_opcode(std::string_view name);

/// Arithmetic/logic operators of tensor_tensor and tensor_scalar. Float operands compute in
/// fp32; when every operand and the output are integers the math is exact 32-bit integer math.
enum class AluOp : uint8_t {
  kBypass,  // passes the tensor operand through
  // Arithmetic.
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kMax,
  kMin,
  kPow,
  kMod,
  kAbsMax,
  // Comparisons and logic: 1 or 0.
  kIsEqual,
  kNotEqual,
  kIsGt,
  kIsGe,
  kIsLt,
  kIsLe,
  kLogicalAnd,
  kLogicalOr,
  kLogicalXor,
  // Bitwise (integers).
  kBitwiseAnd,
  kBitwiseOr,
  kBitwiseXor,
  kShiftLeft,
  kShiftRight,
};
std::string_view alu_op_name(AluOp op);
std::optional<AluOp> parse_alu_op(std::string_view name);
bool alu_op_is_bitwise(AluOp op);

/// ScalarE activation functions: out = func(in * scale + bias), in fp32.
enum class ActFunc : uint8_t {
  kCopy,
  kRelu,
  kGelu,      // erf form
  kGeluTanh,  // tanh approximation
  kSilu,      // x * sigmoid(x)
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kSquare,
  kSoftplus,  // log(1 + exp(x))
  kErf,
  kAbs,
  kSign,
  kSin,
  kCos,
  kMish,    // x * tanh(softplus(x))
  kGeluDx,  // derivatives for the backward pass
  kSiluDx,
};
std::string_view act_func_name(ActFunc f);
std::optional<ActFunc> parse_act_func(std::string_view name);

/// TensorE matmul performance modes (ARCH-v3).
enum class MatmulPerfMode : uint8_t {
  kNone,
  // FP8 x FP8 only, on cores whose preset gives tensor.fp8_double_row_cost_factor > 0: each
  // operand's outermost free dim is a row pair of size 2 ([P, 2, M] stationary, [P, 2, N]
  // moving), contraction index k = r * P + p, so one instruction contracts 2P rows.
  kDoubleRow,
};

/// Distributions of the rng instruction (Philox4x32-10 streams, philox.h).
enum class RngDist : uint8_t {
  kUniform,  // imm + (imm2 - imm) * u, u in [0, 1)
  kNormal,   // imm + imm2 * z, z standard normal
  kInteger,  // imm + bits % (imm2 - imm), exact integers in [imm, imm2)
};
std::string_view rng_dist_name(RngDist d);
std::optional<RngDist> parse_rng_dist(std::string_view name);

enum class ReduceOp : uint8_t { kAdd, kMax, kMin, kMultiply };
std::string_view reduce_op_name(ReduceOp r);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

/// A scalar operand: an immediate, or a per-partition column [P, 1] read from an AP.
struct ScalarOperand {
  bool from_ap = false;
  float imm = 0.0f;
  AccessPattern ap;
  bool operator==(const ScalarOperand&) const = default;
};

struct Instruction {
  Opcode op = Opcode::kSemWait;
  AccessPattern dst{};   // every data instruction
  AccessPattern src0{};  // main input (matmul: stationary; select: predicate)
  AccessPattern src1{};  // second input (matmul: moving; tensor_tensor: rhs; select: on_true)
  AccessPattern src2{};  // select: on_false (when has_src2)
  bool has_src2 = false;
  AccessPattern acc_dst{};  // activation: per-partition reduction output [P, 1] (when has_acc_dst)
  bool has_acc_dst = false;

  AluOp alu0 = AluOp::kBypass, alu1 = AluOp::kBypass;
  ScalarOperand operand0{}, operand1{};     // tensor_scalar operands; activation: scale, bias
  bool reverse0 = false, reverse1 = false;  // tensor_scalar: compute (s op x) instead of (x op s)
  ActFunc func = ActFunc::kCopy;
  ReduceOp reduce = ReduceOp::kAdd;
  uint8_t reduce_axes = 1;  // tensor_reduce: innermost free dims folded
  bool accumulate = false;  // matmul: add into PSUM instead of overwriting
  float imm = 0.0f;         // memset value; select on_false immediate; rng parameter a
  float imm2 = 0.0f;        // rng parameter b
  // matmul only: double row contracts 2P rows per instruction (ARCH-v3).
  MatmulPerfMode perf_mode = MatmulPerfMode::kNone;
  // rng: element e (row-major over dst, partition-major) gets Philox(seed, offset + (base+e)/4).
  RngDist rng_dist = RngDist::kUniform;
  uint64_t rng_seed = 0, rng_offset = 0, rng_base = 0;
  // iota: value(p, i) = base + p * channel_multiplier + sum(i_k * steps[k])
  int32_t iota_base = 0;
  int32_t iota_channel_multiplier = 0;
  std::array<int32_t, kMaxFreeDims> iota_steps{};
  // sem_wait: block until semaphore >= value; sem_signal: add value when the preceding work of
  // this stream is complete.
  uint16_t sem = 0;
  // sem_signal in a multi-core launch (Program::grid > 1): the program instance (physical core of
  // the logical core) whose semaphore it adds to; -1 = this stream's own core. How the two cores
  // of an LNC pair meet (nisa.core_barrier, nisa.sendrecv).
  int8_t sem_pcore = -1;
  int32_t sem_value = 0;

  bool is_sync() const { return op == Opcode::kSemWait || op == Opcode::kSemSignal; }
};

/// Which engine types may execute an opcode (validated per stream).
bool engine_supports(EngineKind e, Opcode op);

}  // namespace neuronsim::device_model
