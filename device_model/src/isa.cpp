#include "neuronsim/device_model/isa.h"

#include <fmt/format.h>

namespace neuronsim::device_model {
namespace {

template <typename E, size_t N>
std::optional<E> parse_by_name(std::string_view name,
                               const std::array<std::string_view, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// The name of an enum value by its index in `names`; "?" for a value outside the table.
template <typename E, size_t N>
std::string_view name_by_index(E e, const std::array<std::string_view, N>& names) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : "?";
}

constexpr std::array<std::string_view, kOpcodeCount> kOpcodeNames = {
    "matmul",      "transpose", "activation", "tensor_tensor", "tensor_scalar", "tensor_reduce",
    "tensor_copy", "iota",      "memset",     "select",        "dma_copy",      "sem_wait",
    "sem_signal",  "rng"};

constexpr std::array<std::string_view, 3> kRngNames = {"uniform", "normal", "integer"};

constexpr std::array<std::string_view, 24> kAluNames = {
    "bypass",      "add",         "subtract",   "multiply",    "divide",      "max",
    "min",         "pow",         "mod",        "abs_max",     "is_equal",    "not_equal",
    "is_gt",       "is_ge",       "is_lt",      "is_le",       "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",  "shift_right"};

constexpr std::array<std::string_view, 22> kActNames = {
    "copy", "relu", "gelu",  "gelu_tanh",  "silu",    "sigmoid",  "tanh", "exp",
    "log",  "sqrt", "rsqrt", "reciprocal", "square",  "softplus", "erf",  "abs",
    "sign", "sin",  "cos",   "mish",       "gelu_dx", "silu_dx"};

constexpr std::array<std::string_view, 4> kReduceNames = {"add", "max", "min", "multiply"};

}  // namespace

std::string_view engine_kind_name(EngineKind e) {
  for (const EngineInfo& i : kEngines) {
    if (i.kind == e) return i.stream;
  }
  return "?";  // not an engine (a malformed program)
}

std::string_view engine_display_name(EngineKind e) {
  for (const EngineInfo& i : kEngines) {
    if (i.kind == e) return i.row;
  }
  return "?";
}

std::string_view opcode_name(Opcode op) {
  return name_by_index(op, kOpcodeNames);
}
std::optional<Opcode> parse_opcode(std::string_view n) {
  return parse_by_name<Opcode>(n, kOpcodeNames);
}
std::string_view alu_op_name(AluOp op) {
  return name_by_index(op, kAluNames);
}
std::optional<AluOp> parse_alu_op(std::string_view n) {
  return parse_by_name<AluOp>(n, kAluNames);
}
std::string_view act_func_name(ActFunc f) {
  return name_by_index(f, kActNames);
}
std::optional<ActFunc> parse_act_func(std::string_view n) {
  return parse_by_name<ActFunc>(n, kActNames);
}
std::string_view reduce_op_name(ReduceOp r) {
  return name_by_index(r, kReduceNames);
}
std::optional<ReduceOp> parse_reduce_op(std::string_view n) {
  return parse_by_name<ReduceOp>(n, kReduceNames);
}

std::string_view rng_dist_name(RngDist d) {
  return name_by_index(d, kRngNames);
}
std::optional<RngDist> parse_rng_dist(std::string_view n) {
  return parse_by_name<RngDist>(n, kRngNames);
}

bool alu_op_is_bitwise(AluOp op) {
  return op == AluOp::kBitwiseAnd || op == AluOp::kBitwiseOr || op == AluOp::kBitwiseXor ||
         op == AluOp::kShiftLeft || op == AluOp::kShiftRight;
}

bool engine_supports(EngineKind e, Opcode op) {
  if (op == Opcode::kSemWait || op == Opcode::kSemSignal) return true;
  switch (e) {
    case EngineKind::kTensor:
      return op == Opcode::kMatmul || op == Opcode::kTranspose;
    case EngineKind::kVector:
      return op == Opcode::kTensorTensor || op == Opcode::kTensorScalar ||
             op == Opcode::kTensorReduce || op == Opcode::kTensorCopy || op == Opcode::kMemset ||
             op == Opcode::kSelect || op == Opcode::kRng;
    case EngineKind::kScalar:
      return op == Opcode::kActivation || op == Opcode::kTensorScalar || op == Opcode::kTensorCopy;
    case EngineKind::kGpSimd:
      return op == Opcode::kTensorTensor || op == Opcode::kTensorScalar ||
             op == Opcode::kTensorReduce || op == Opcode::kTensorCopy || op == Opcode::kIota ||
             op == Opcode::kMemset || op == Opcode::kSelect || op == Opcode::kRng;
    case EngineKind::kDma:
      return op == Opcode::kDmaCopy;
  }
  return false;
}

}  // namespace neuronsim::device_model
