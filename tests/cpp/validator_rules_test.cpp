// Every validation rule, triggered on purpose: the error names the rule, the instruction, the
// stream and the problem. The boundary cases just inside each limit must validate.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/validator.h"

namespace neuronsim::device_model {
namespace {

using namespace isa;

constexpr DType F32 = DType::kFp32, BF16 = DType::kBf16, I32 = DType::kInt32, U8 = DType::kUint8;
const StreamId kTensorS{EngineKind::kTensor, 0}, kVectorS{EngineKind::kVector, 0},
    kScalarS{EngineKind::kScalar, 0}, kGpSimdS{EngineKind::kGpSimd, 0}, kDma0{EngineKind::kDma, 0};

ChipParams chip_params(const std::vector<std::string>& overrides = {}) {
  Config c = Config::load("trn1");
  c.apply_overrides(overrides);
  return parse_chip_params(c);
}

AccessPattern hbm(DType t, uint64_t address, uint32_t rows, uint32_t cols) {
  return hbm_rows(t, address, rows, cols, cols);
}

struct Case {
  std::string name;
  std::string rule;
  Program program;
  int64_t index;
  std::string stream;
  std::vector<std::string> mentions;  // what() must contain each
  std::vector<std::string> overrides = {};
  std::function<bool(uint64_t, uint64_t)> hbm_range_valid = {};
};

// The error a case raises, or nullopt with a failure recorded.
std::optional<ValidationError> run_case(const Case& c) {
  const ChipParams chip = chip_params(c.overrides);
  ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, c.hbm_range_valid};
  try {
    validate(c.program, vc);
  } catch (const ValidationError& e) {
    return e;
  }
  ADD_FAILURE() << c.name << ": validated, expected rule " << c.rule;
  return std::nullopt;
}

class Cases {
 public:
  // The bad instruction sits at index 1, after a harmless wait, so the reported index is
  // checked for real.
  Case& bad(std::string name, std::string rule, StreamId s, const Instruction& in,
            std::vector<std::string> mentions) {
    Program p;
    p.name = "case";
    p.stream(s).instructions = {sem_wait(0, 0), in};
    return stream_level(std::move(name), std::move(rule), std::move(p), 1, s.name(),
                        std::move(mentions));
  }
  Case& stream_level(std::string name, std::string rule, Program p, int64_t index,
                     std::string stream, std::vector<std::string> mentions) {
    all.push_back({std::move(name), std::move(rule), std::move(p), index, std::move(stream),
                   std::move(mentions)});
    return all.back();
  }
  std::vector<Case> all;
};

std::vector<Case> rule_cases() {
  Cases cs;
  const auto t128 = sbuf_tile(F32, 128, 0, 64);
  const auto bf = [](uint32_t parts, uint32_t free) { return sbuf_tile(BF16, parts, 0, free); };
  const auto ps = [](uint32_t parts, uint32_t free) { return psum_tile(F32, parts, 0, free); };

  // ---- streams ----
  {
    Program p;
    p.streams.push_back({StreamId{EngineKind::kVector, 3}, {tensor_copy(t128, t128)}});
    cs.stream_level("compute stream with a queue", "stream-id", p, -1, "vector",
                    {"VectorE has no queues", "queue 3"});
  }
  {
    Program p;
    p.streams.push_back({StreamId{static_cast<EngineKind>(9), 0}, {sem_signal(0)}});
    cs.stream_level("unknown engine code", "stream-id", p, -1, "?", {"engine code 9"});
  }
  {
    Program p;
    p.streams.push_back({kTensorS, {}});
    p.streams.push_back({kTensorS, {}});
    cs.stream_level("duplicate stream", "stream-duplicate", p, -1, "tensor",
                    {"two streams for TensorE"});
  }
  {
    Program p;
    p.stream({EngineKind::kDma, 16}).instructions = {sem_signal(0)};
    cs.stream_level("dma queue 16", "dma-queue-range", p, -1, "dma16",
                    {"DMA queue 16 does not exist; the core has 16 queues"});
  }
  // ---- logical cores (trn1: no LNC, so grid 1 only) ----
  {
    Program p;
    p.name = "spmd";
    p.grid = 2;
    p.stream(kVectorS).instructions = {sem_signal(0)};
    cs.stream_level(
        "grid 2 on trn1", "grid", p, -1, "-",
        {"program 'spmd' launches on 2 physical cores (grid 2)", "has 1 (chip.logical_core_size)"});
  }
  {
    Program p;
    p.stream({EngineKind::kVector, 0, 1}).instructions = {sem_signal(0)};
    cs.stream_level("stream of instance 1 in grid 1", "grid", p, -1, "pcore1.vector",
                    {"stream of program instance 1 in a launch of grid 1"});
  }
  {
    Instruction sig = sem_signal(0);
    sig.sem_pcore = 1;
    cs.bad("signal to instance 1 in grid 1", "semaphore-pcore", kVectorS, sig,
           {"signals program instance 1, but the launch has 1 (grid 1)"});
  }

  // ---- engines and opcodes ----
  cs.bad("matmul on VectorE", "engine-opcode", kVectorS,
         matmul(ps(64, 64), bf(64, 64), bf(64, 64), false), {"VectorE cannot execute matmul"});
  cs.bad("activation on TensorE", "engine-opcode", kTensorS, activation(t128, t128, ActFunc::kRelu),
         {"TensorE cannot execute activation"});
  cs.bad("iota on VectorE", "engine-opcode", kVectorS, iota(t128, 0, 1, {1}),
         {"VectorE cannot execute iota"});
  cs.bad("dma_copy on GpSimdE", "engine-opcode", kGpSimdS, dma_copy(t128, t128),
         {"GpSimdE cannot execute dma_copy"});
  {
    Instruction in = tensor_copy(t128, t128);
    in.op = static_cast<Opcode>(77);
    cs.bad("unknown opcode", "engine-opcode", kVectorS, in, {"unknown opcode code 77"});
  }

  // ---- semaphores ----
  cs.bad("semaphore 64", "semaphore-range", kVectorS, sem_signal(64),
         {"semaphore 64 does not exist; the core has 64"});
  cs.bad("semaphore 65535", "semaphore-range", kDma0, sem_wait(65535, 1), {"semaphore 65535"});
  cs.bad("negative wait", "semaphore-value", kScalarS, sem_wait(3, -1),
         {"wait target -1 is negative"});
  cs.bad("zero signal", "semaphore-value", kScalarS, sem_signal(3, 0),
         {"signal increment 0 must be positive"});
  cs.bad("most negative signal", "semaphore-value", kTensorS,
         sem_signal(3, std::numeric_limits<int32_t>::min()), {"must be positive"});

  // ---- access pattern shape ----
  {
    AccessPattern ap = t128;
    ap.ndims = 5;
    cs.bad("five free dims", "ap-shape", kVectorS, tensor_copy(t128, ap),
           {"src0 has 5 free dims; at most 4"});
  }
  cs.bad("zero partitions", "ap-shape", kVectorS,
         tensor_copy(sbuf_tile(F32, 0, 0, 4), sbuf_tile(F32, 0, 64, 4)),
         {"dst has zero partitions"});
  cs.bad("zero-size dim", "ap-shape", kVectorS, memset(sbuf(F32, 0, 8, 0, {{4, 2}, {1, 0}}), 1.0f),
         {"dst free dim 1 has size 0"});
  {
    // 2^32-1 broadcast rows x four 2^32-1 dims: the element count alone overflows 64 bits.
    AccessPattern big = hbm_rows(F32, 0, UINT32_MAX, 1, 0);
    big.ndims = 4;
    for (auto& d : big.dims) d = {0, UINT32_MAX};
    cs.bad("element count overflows", "ap-shape", kDma0, dma_copy(t128, big),
           {"src0 has 4294967295 partitions x", "more than 2^63 bytes"});
  }

  // ---- partitions ----
  cs.bad("partitions past 128", "partition-range", kVectorS,
         tensor_copy(sbuf_tile(F32, 65, 0, 4, 64), sbuf_tile(F32, 65, 0, 4, 64)),
         {"dst uses partitions [64, 129) of sbuf 128"});
  cs.bad("DMA to partition 200", "partition-range", kDma0,
         dma_copy(sbuf_tile(F32, 1, 0, 4, 200), hbm(F32, 0, 1, 4)), {"[200, 201) of sbuf 128"});
  cs.bad("PSUM partitions", "partition-range", kVectorS,
         tensor_copy(psum_tile(F32, 32, 0, 4, 100), sbuf_tile(F32, 32, 0, 4)),
         {"[100, 132) of psum 128"});
  cs.bad("64 partitions at 32", "partition-start-alignment", kVectorS,
         tensor_copy(sbuf_tile(F32, 64, 0, 4, 32), sbuf_tile(F32, 64, 0, 4)),
         {"dst starts at partition 32 with 64 partitions; must start at 0 or 64"});
  cs.bad("65 partitions at 32", "partition-start-alignment", kScalarS,
         activation(sbuf_tile(F32, 65, 0, 4), sbuf_tile(F32, 65, 0, 4, 32), ActFunc::kExp),
         {"src0 starts at partition 32 with 65 partitions; must start at 0"});
  cs.bad("16 partitions at 16", "partition-start-alignment", kTensorS,
         transpose(psum_tile(F32, 4, 0, 16), sbuf_tile(BF16, 16, 0, 4, 16)),
         {"src0 starts at partition 16", "must start at 0, 32, 64 or 96"});

  // ---- byte bounds ----
  cs.bad("past the SBUF partition", "sbuf-bounds", kVectorS,
         memset(sbuf_tile(F32, 128, 196604, 2), 0.0f),
         {"dst touches bytes [196604, 196612) of each partition; sbuf has 196608 bytes per "
          "partition"});
  cs.bad("negative stride below 0", "sbuf-bounds", kVectorS,
         memset(sbuf(F32, 0, 1, 0, {{-1, 2}}), 0.0f), {"[-4, 4)"});
  cs.bad("stride overflows int64", "sbuf-bounds", kScalarS,
         tensor_copy(sbuf(F32, 0, 1, 0, {{std::numeric_limits<int64_t>::max(), 3}}),
                     sbuf_tile(F32, 1, 0, 3)),
         {"dst touches bytes", "sbuf has 196608"});
  cs.bad("offset near 2^64", "sbuf-bounds", kDma0,
         dma_copy(sbuf_tile(U8, 1, UINT64_MAX, 1), hbm(U8, 0, 1, 1)),
         {"dst touches bytes", "+18446744073709551615"});
  cs.bad("past the PSUM partition", "psum-bounds", kVectorS,
         tensor_copy(psum_tile(F32, 128, 16384, 1), sbuf_tile(F32, 128, 0, 1)),
         {"dst touches bytes [16384, 16388) of each partition; psum has 16384"});
  {
    const uint64_t cap = chip_params().hbm.capacity_bytes;
    cs.bad("past HBM", "hbm-bounds", kDma0,
           dma_copy(sbuf_tile(F32, 1, 0, 2), hbm(F32, cap - 4, 1, 2)),
           {"src0 touches HBM bytes [0x3fffffffc, 0x400000004); HBM capacity is 0x400000000"});
    // Rows walking down from address 0.
    cs.bad("HBM below 0", "hbm-bounds", kDma0,
           dma_copy(hbm_rows(F32, 0, 2, 4, -4), sbuf_tile(F32, 2, 0, 4)),
           {"dst touches HBM bytes [-0x10, 0x10)"});
    cs.bad("outside the allocations", "hbm-bounds", kDma0,
           dma_copy(hbm(F32, 4096, 1, 4), sbuf_tile(F32, 1, 0, 4)),
           {"dst touches HBM bytes [0x1000, 0x1010) outside any allocation"})
        .hbm_range_valid = [](uint64_t a, uint64_t n) { return a + n <= 4096; };
  }

  // ---- memory spaces ----
  cs.bad("VectorE reads HBM", "memory-space", kVectorS, tensor_copy(t128, hbm(F32, 0, 128, 64)),
         {"src0 is in HBM; compute engines access only SBUF and PSUM"});
  cs.bad("GpSimdE writes PSUM", "memory-space", kGpSimdS, memset(ps(32, 4), 0.0f),
         {"dst is in PSUM; GpSimdE cannot access PSUM"});
  cs.bad("matmul moving in PSUM", "memory-space", kTensorS,
         matmul(ps(64, 64), bf(64, 64), psum_tile(BF16, 64, 0, 64), false),
         {"reads both matmul operands from SBUF"});
  cs.bad("matmul into SBUF", "memory-space", kTensorS,
         matmul(sbuf_tile(F32, 64, 0, 64), bf(64, 64), bf(64, 64), false),
         {"writes matmul results to PSUM"});
  cs.bad("transpose into SBUF", "memory-space", kTensorS,
         transpose(sbuf_tile(F32, 4, 0, 64), bf(64, 4)), {"transpose reads SBUF and writes PSUM"});
  cs.bad("DMA from PSUM", "memory-space", kDma0, dma_copy(hbm(F32, 0, 32, 4), ps(32, 4)),
         {"it cannot access PSUM"});
  {
    AccessPattern ap = t128;
    ap.space = static_cast<MemSpace>(7);
    cs.bad("unknown memory space", "memory-space", kDma0, dma_copy(ap, t128),
           {"dst has an unknown memory space code 7"});
  }

  // ---- data types ----
  {
    AccessPattern ap = t128;
    ap.dtype = static_cast<DType>(40);
    cs.bad("unknown dtype", "dtype-support", kVectorS, tensor_copy(t128, ap),
           {"src0 has an unknown dtype code 40"});
  }
  cs.bad("int8 matmul", "dtype-support", kTensorS,
         matmul(ps(64, 64), sbuf_tile(DType::kInt8, 64, 0, 64), bf(64, 64), false),
         {"matmul inputs must be fp8/bf16/fp16/fp32, got int8 and bf16"});
  cs.bad("fp32 with bf16", "dtype-support", kTensorS,
         matmul(ps(64, 64), sbuf_tile(F32, 64, 0, 64), bf(64, 64), false),
         {"fp32 matmul input must pair with fp32, got fp32 and bf16"});
  cs.bad("bf16 PSUM result", "dtype-support", kTensorS,
         matmul(psum_tile(BF16, 64, 0, 64), bf(64, 64), bf(64, 64), false),
         {"dst must be fp32, got bf16"});
  cs.bad("int32 transpose", "dtype-support", kTensorS,
         transpose(psum_tile(I32, 4, 0, 64), sbuf_tile(I32, 64, 0, 4)),
         {"transpose takes a float input", "got int32 -> int32"});

  // ---- shapes ----
  cs.bad("tensor_tensor rhs", "shape-mismatch", kVectorS,
         tensor_tensor(t128, t128, sbuf_tile(F32, 128, 4096, 32), AluOp::kAdd),
         {"dst is [128, 64] but src1 is [128, 32]"});
  cs.bad("copy partitions", "shape-mismatch", kGpSimdS,
         tensor_copy(sbuf_tile(F32, 64, 0, 64), t128), {"dst is [64, 64] but src0 is [128, 64]"});
  cs.bad("matmul dst", "shape-mismatch", kTensorS,
         matmul(ps(64, 32), bf(128, 64), bf(128, 64), false),
         {"dst must be [64, 64] (stationary free x moving free), got [64, 32]"});
  cs.bad("transpose dst", "shape-mismatch", kTensorS, transpose(ps(64, 4), bf(64, 4)),
         {"dst must be [4, 64], got [64, 4]"});
  cs.bad("reduce dst", "shape-mismatch", kVectorS,
         tensor_reduce(sbuf_tile(F32, 128, 0, 2), sbuf(F32, 0, 128, 64, {{8, 4}, {1, 8}}),
                       ReduceOp::kAdd, 1),
         {"dst is [128, 2] but reducing 1 innermost axes of src0 [128, 32] gives [128, 4]"});
  cs.bad("select on_false", "shape-mismatch", kVectorS,
         select(t128, t128, t128, sbuf_tile(F32, 128, 0, 63)),
         {"dst is [128, 64] but on_false (src2) is [128, 63]"});
  cs.bad("dma element count", "shape-mismatch", kDma0,
         dma_copy(sbuf_tile(F32, 128, 0, 4), hbm(F32, 0, 128, 5)),
         {"src0 has 640 elements but dst has 512"});

  // ---- TensorE limits ----
  cs.bad("stationary/moving K", "matmul-contraction", kTensorS,
         matmul(ps(64, 64), bf(128, 64), bf(64, 64), false),
         {"stationary has 128 partitions but moving has 64"});
  // K beyond the PE rows needs a PE array smaller than SBUF (otherwise partition-range fires).
  cs.bad("K beyond the PE rows", "matmul-contraction", kTensorS,
         matmul(ps(64, 64), bf(128, 64), bf(128, 64), false),
         {"contraction (partitions) 128 exceeds the 64 PE rows"})
      .overrides = {"tensor.rows=64"};
  cs.bad("stationary 129 wide", "matmul-stationary-size", kTensorS,
         matmul(ps(128, 64), bf(128, 129), bf(128, 64), false),
         {"stationary free size 129 exceeds the 128 PE columns"});
  cs.bad("transpose 129 wide", "matmul-stationary-size", kTensorS,
         transpose(ps(128, 128), bf(128, 129)),
         {"transpose input [128, 129] exceeds the 128x128 PE array"});
  cs.bad("moving 513", "matmul-moving-size", kTensorS,
         matmul(ps(128, 513), bf(128, 128), bf(128, 513), false),
         {"moving free size 513 exceeds 512"});
  cs.bad("dst across banks", "psum-bank", kTensorS,
         matmul(psum_tile(F32, 128, 1028, 256), bf(128, 128), bf(128, 256), true),
         {"dst bytes [1028, 2052) cross a PSUM bank boundary (banks of 2048 bytes)"});

  // ---- VectorE / ScalarE / GpSimdE operands ----
  cs.bad("VectorE PSUM 4097", "free-size-limit", kVectorS,
         tensor_copy(psum_tile(BF16, 128, 0, 4097), bf(128, 4097)),
         {"dst has 4097 elements per partition; VectorE allows 4096 in psum"});
  cs.bad("VectorE SBUF 65537", "free-size-limit", kVectorS,
         memset(sbuf_tile(U8, 128, 0, 65537), 0.0f),
         {"dst has 65537 elements per partition; VectorE allows 65536 in sbuf"});
  cs.bad("both inputs in PSUM", "both-inputs-psum", kVectorS,
         tensor_tensor(t128, ps(128, 64), psum_tile(F32, 128, 4096, 64), AluOp::kAdd),
         {"tensor_tensor cannot read both inputs from PSUM"});
  cs.bad("operand [128, 2]", "scalar-operand-shape", kVectorS,
         tensor_scalar(t128, t128, AluOp::kAdd, per_partition(sbuf_tile(F32, 128, 8192, 2))),
         {"operand0 must be [128, 1] (one value per partition), got [128, 2]"});
  cs.bad(
      "bias on 64 partitions", "scalar-operand-shape", kScalarS,
      activation(t128, t128, ActFunc::kExp, imm(1.0f), per_partition(sbuf_tile(F32, 64, 8192, 1))),
      {"bias (operand1) must be [128, 1]", "got [64, 1]"});
  {
    Instruction in = activation(t128, t128, ActFunc::kExp);
    in.has_acc_dst = true;
    in.acc_dst = sbuf_tile(F32, 128, 8192, 2);
    cs.bad("acc_dst [128, 2]", "scalar-operand-shape", kScalarS, in,
           {"acc_dst must be [128, 1], got [128, 2]"});
  }
  cs.bad("reduce 0 axes", "reduce-axes", kVectorS, tensor_reduce(t128, t128, ReduceOp::kAdd, 0),
         {"reduce_axes 0 must be in [1, 1]"});
  cs.bad("reduce 2 axes of 1", "reduce-axes", kGpSimdS,
         tensor_reduce(sbuf_tile(F32, 128, 0, 1), t128, ReduceOp::kMax, 2),
         {"reduce_axes 2 must be in [1, 1]"});
  cs.bad("tensor_tensor bypass", "alu-op", kVectorS,
         tensor_tensor(t128, t128, t128, AluOp::kBypass), {"tensor_tensor needs an operator"});
  cs.bad("bitwise on fp32", "alu-op", kVectorS,
         tensor_tensor(sbuf_tile(I32, 128, 0, 64), sbuf_tile(I32, 128, 0, 64), t128,
                       AluOp::kBitwiseAnd),
         {"alu0 'bitwise_and' needs integer operands"});
  cs.bad("shift by a float column", "alu-op", kGpSimdS,
         tensor_scalar(sbuf_tile(I32, 128, 0, 64), sbuf_tile(I32, 128, 0, 64), AluOp::kAdd, imm(1),
                       AluOp::kShiftLeft, per_partition(sbuf_tile(F32, 128, 8192, 1))),
         {"alu1 'shift_left' needs integer operands"});
  cs.bad("unknown ALU code", "alu-op", kVectorS,
         tensor_tensor(t128, t128, t128, static_cast<AluOp>(99)),
         {"alu0 has an unknown operator code 99"});
  cs.bad("unknown reduce code", "alu-op", kVectorS,
         tensor_reduce(sbuf_tile(F32, 128, 0, 1), t128, static_cast<ReduceOp>(9), 1),
         {"unknown reduce operator code 9"});
  {
    Instruction in = rng(t128, RngDist::kUniform, 0, 1, 1, 2, 3);
    in.rng_dist = static_cast<RngDist>(7);
    cs.bad("unknown rng distribution", "alu-op", kVectorS, in, {"unknown rng distribution code 7"});
  }
  cs.bad("rng empty integer range", "alu-op", kGpSimdS,
         rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, 4, 4, 0, 0, 0),
         {"rng integer range [4, 4) holds no integer"});
  // [0.5, 0.9) truncates to [0, 0): a division by zero in the executor.
  cs.bad("rng range empty after truncation", "alu-op", kVectorS,
         rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, 0.5f, 0.9f, 0, 0, 0),
         {"rng integer range [0.5, 0.9) holds no integer (bounds truncate to [0, 0))"});
  cs.bad("rng infinite bound", "alu-op", kVectorS,
         rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, 0,
             std::numeric_limits<float>::infinity(), 0, 0, 0),
         {"rng integer bounds [0, inf) must be finite and within +-2^31"});
  cs.bad("rng NaN bound", "alu-op", kVectorS,
         rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, std::numeric_limits<float>::quiet_NaN(),
             3, 0, 0, 0),
         {"rng integer bounds [nan, 3)"});
  cs.bad("unknown function", "activation-function", kScalarS,
         activation(t128, t128, static_cast<ActFunc>(50)), {"unknown activation function code 50"});
  return cs.all;
}

TEST(ValidatorRules, EveryCaseRaisesItsRule) {
  for (const Case& c : rule_cases()) {
    SCOPED_TRACE(c.name);
    auto e = run_case(c);
    if (!e) continue;
    EXPECT_EQ(e->rule(), c.rule) << e->what();
    EXPECT_EQ(e->instruction_index(), c.index) << e->what();
    EXPECT_EQ(e->stream(), c.stream) << e->what();
    const std::string what = e->what();
    EXPECT_NE(what.find("rule '" + c.rule + "'"), std::string::npos) << what;
    for (const auto& m : c.mentions)
      EXPECT_NE(what.find(m), std::string::npos) << what << "\n  missing: " << m;
  }
}

// A new rule without a case here fails this test.
TEST(ValidatorRules, CasesCoverExactlyTheListedRules) {
  std::set<std::string> raised;
  for (const Case& c : rule_cases()) {
    if (auto e = run_case(c)) raised.insert(e->rule());
  }
  std::set<std::string> listed;
  for (auto r : validation_rules()) listed.insert(std::string(r));
  EXPECT_EQ(listed.size(), validation_rules().size()) << "duplicate rule ids";
  EXPECT_EQ(raised, listed);
}

TEST(ValidatorRules, MessageFormat) {
  const ChipParams chip = chip_params();
  ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, {}};
  Program p;
  p.stream(kVectorS).instructions = {sem_wait(0, 0), sem_signal(70)};
  try {
    validate(p, vc);
    FAIL() << "validated";
  } catch (const ValidationError& e) {
    EXPECT_STREQ(e.what(),
                 "instruction 1 on vector (sem_signal): rule 'semaphore-range': semaphore 70 does "
                 "not exist; the core has 64");
    EXPECT_EQ(e.opcode(), "sem_signal");
  }
}

// The first violation in stream order wins, and later streams are not reached.
TEST(ValidatorRules, ReportsTheFirstViolation) {
  const ChipParams chip = chip_params();
  ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, {}};
  Program p;
  p.stream(kScalarS).instructions = {sem_signal(1), sem_signal(2), sem_wait(99, 0),
                                     sem_signal(0, 0)};
  p.stream(kVectorS).instructions = {sem_signal(1, -5)};
  try {
    validate(p, vc);
    FAIL() << "validated";
  } catch (const ValidationError& e) {
    EXPECT_EQ(e.rule(), "semaphore-range");
    EXPECT_EQ(e.instruction_index(), 2);
    EXPECT_EQ(e.stream(), "scalar");
  }
}

// Just inside every limit: these must validate.
TEST(ValidatorRules, BoundaryCasesPass) {
  const ChipParams chip = chip_params();
  const uint64_t cap = chip.hbm.capacity_bytes;
  ValidationContext vc{&chip.core, cap, {}};
  auto ok = [&](const std::string& name, StreamId s, const Instruction& in) {
    Program p;
    p.stream(s).instructions = {in};
    try {
      validate(p, vc);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  };
  // Partition starts (ARCH-v2).
  for (auto [start, parts] : std::vector<std::pair<uint32_t, uint32_t>>{{0, 128},
                                                                        {0, 65},
                                                                        {0, 64},
                                                                        {64, 64},
                                                                        {64, 33},
                                                                        {0, 32},
                                                                        {32, 32},
                                                                        {64, 32},
                                                                        {96, 32},
                                                                        {96, 1},
                                                                        {32, 17}}) {
    const auto ap = sbuf_tile(F32, parts, 0, 8, start);
    ok(fmt::format("{} partitions at {}", parts, start), kVectorS, tensor_copy(ap, ap));
  }
  // A matmul exactly filling a PSUM bank, in the first and the last bank; full PE array.
  const auto st = sbuf_tile(BF16, 128, 0, 128), mv = sbuf_tile(BF16, 128, 256, 512);
  ok("matmul bank 0", kTensorS, matmul(psum_tile(F32, 128, 0, 512), st, mv, false));
  ok("matmul bank 7", kTensorS, matmul(psum_tile(F32, 128, 7 * 2048, 512), st, mv, true));
  ok("matmul fp32", kTensorS,
     matmul(psum_tile(F32, 128, 0, 512), sbuf_tile(F32, 128, 0, 128), sbuf_tile(F32, 128, 512, 512),
            false));
  ok("matmul fp8 x bf16", kTensorS,
     matmul(psum_tile(F32, 32, 0, 16, 96), sbuf_tile(DType::kFp8E4M3, 64, 0, 32, 64),
            sbuf_tile(BF16, 64, 0, 16, 64), false));
  ok("transpose 128x128", kTensorS,
     transpose(psum_tile(BF16, 128, 0, 128), sbuf_tile(BF16, 128, 0, 128)));
  // VectorE free-size limits and whole partitions.
  ok("VectorE PSUM 4096", kVectorS,
     tensor_copy(psum_tile(F32, 128, 0, 4096), sbuf_tile(F32, 128, 0, 4096)));
  ok("VectorE SBUF 65536", kVectorS, memset(sbuf_tile(BF16, 128, 0, 65536), 0.0f));
  ok("ScalarE whole SBUF partition", kScalarS,
     activation(sbuf_tile(F32, 128, 0, 49152), sbuf_tile(F32, 128, 0, 49152), ActFunc::kCopy));
  ok("last SBUF byte", kGpSimdS, memset(sbuf_tile(U8, 1, 196607, 1, 96), 1.0f));
  ok("negative stride within the partition", kVectorS,
     tensor_copy(sbuf(F32, 0, 1, 12, {{-1, 4}}), sbuf_tile(F32, 1, 0, 4)));
  ok("broadcast stride 0", kVectorS,
     tensor_tensor(sbuf_tile(F32, 128, 0, 512), sbuf_tile(F32, 128, 4096, 512),
                   sbuf(F32, 0, 128, 8192, {{0, 512}}), AluOp::kMultiply));
  ok("one input in PSUM", kVectorS,
     tensor_tensor(sbuf_tile(F32, 128, 0, 64), psum_tile(F32, 128, 0, 64),
                   sbuf_tile(F32, 128, 0, 64), AluOp::kAdd));
  ok("bitwise on integers", kGpSimdS,
     tensor_scalar(sbuf_tile(I32, 128, 0, 8), sbuf_tile(I32, 128, 0, 8), AluOp::kBitwiseXor, imm(5),
                   AluOp::kShiftRight, per_partition(sbuf_tile(DType::kInt16, 128, 64, 1))));
  ok("reduce every axis", kVectorS,
     tensor_reduce(sbuf_tile(F32, 128, 0, 1),
                   sbuf(F32, 0, 128, 64, {{1, 2}, {2, 2}, {4, 2}, {8, 2}}), ReduceOp::kMultiply,
                   4));
  ok("select with an immediate", kGpSimdS,
     select(sbuf_tile(F32, 32, 0, 8, 32), sbuf_tile(U8, 32, 64, 8, 32),
            sbuf_tile(F32, 32, 128, 8, 32), -1.0f));
  {
    Instruction in =
        activation(sbuf_tile(F32, 128, 0, 64), psum_tile(F32, 128, 0, 64), ActFunc::kSiluDx,
                   per_partition(sbuf_tile(F32, 128, 512, 1)), imm(0.5f));
    in.has_acc_dst = true;
    in.acc_dst = sbuf_tile(F32, 128, 516, 1);
    ok("activation with accumulate", kScalarS, in);
  }
  ok("iota", kGpSimdS, iota(sbuf(I32, 0, 128, 0, {{4, 2}, {1, 4}}), 0, 8, {4, 1}));
  ok("rng widest integer range", kVectorS,
     rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, -0x1p31f, 0x1p31f, UINT64_MAX, 0, 0));
  ok("rng fractional integer bounds", kVectorS,
     rng(sbuf_tile(I32, 128, 0, 8), RngDist::kInteger, -0.5f, 1.5f, 1, 0, 0));
  ok("rng normal", kGpSimdS, rng(sbuf_tile(BF16, 32, 0, 8, 96), RngDist::kNormal, 0, 1, 7, 8, 9));
  // DMA: reshape, broadcast rows, the last byte of HBM, the last queue, HBM to HBM.
  ok("DMA reshape", {EngineKind::kDma, 15},
     dma_copy(sbuf_tile(F32, 128, 0, 4), hbm(F32, 0, 1, 512)));
  ok("DMA broadcast row", kDma0,
     dma_copy(sbuf_tile(BF16, 128, 0, 64), hbm_rows(BF16, 1024, 128, 64, 0)));
  ok("DMA last HBM byte", kDma0, dma_copy(sbuf_tile(U8, 1, 0, 1), hbm(U8, cap - 1, 1, 1)));
  ok("DMA HBM to HBM", kDma0, dma_copy(hbm(F32, 0, 4, 4), hbm(F32, 1024, 4, 4)));
  ok("DMA to any partition", kDma0, dma_copy(sbuf_tile(F32, 3, 0, 4, 125), hbm(F32, 0, 3, 4)));
  // Semaphores at the edge.
  ok("semaphore 63", kTensorS, sem_signal(63, std::numeric_limits<int32_t>::max()));
  ok("wait for 0", kDma0, sem_wait(0, 0));
}

TEST(ValidatorRules, HbmRangeCheckAcceptsInsideAllocations) {
  const ChipParams chip = chip_params();
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, [&](uint64_t a, uint64_t n) {
                         calls.emplace_back(a, n);
                         return a >= 4096 && a + n <= 8192;
                       }};
  Program p;
  p.stream(kDma0).instructions = {
      dma_copy(sbuf_tile(F32, 2, 0, 2), hbm_rows(F32, 8192 - 16, 2, 2, -2))};
  EXPECT_NO_THROW(validate(p, vc));
  ASSERT_EQ(calls.size(), 1u);
  // Rows go downwards: the span starts one row below the offset.
  EXPECT_EQ(calls[0], std::make_pair(uint64_t{8192 - 24}, uint64_t{16}));
}

// An empty program and empty streams are valid; so are compute streams with only sync.
TEST(ValidatorRules, EmptyProgramsPass) {
  const ChipParams chip = chip_params();
  ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, {}};
  Program p;
  EXPECT_NO_THROW(validate(p, vc));
  p.stream(kTensorS);
  p.stream({EngineKind::kDma, 15});
  EXPECT_NO_THROW(validate(p, vc));
}

}  // namespace
}  // namespace neuronsim::device_model
