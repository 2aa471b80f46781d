// The timing model against the published cost rules (HARDWARE.md 1.2-1.9, 2.2, 7). Every test runs
// instructions on a Device in timing mode and measures simulated time, from the trace (start of one
// instruction to the start of the next = initiation interval) or from run durations; each asserts
// the rule within 5%. Sources: ARCH-v2/v3 (architecture guides), ISA-2.26 (per-instruction
// "Estimated instruction cost"), PERF (NKI performance guide), DMA-OVERVIEW, DMA-BW, SCHEMA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/spmd.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::AccessPattern;
using device_model::ActFunc;
using device_model::AluOp;
using device_model::DType;
using device_model::Instruction;
using device_model::ReduceOp;
using traces::SliceRecord;
namespace isa = device_model::isa;

constexpr double kTol = 0.05;  // every rule must hold within 5%

#define EXPECT_WITHIN_5PCT(measured, rule) \
  EXPECT_NEAR((measured), (rule), kTol*(rule)) << #measured " vs rule " #rule

std::unique_ptr<device_model::Device> timing_device(
    const std::string& preset = "trn1", const std::vector<std::string>& overrides = {}) {
  return testing::make_device(preset, overrides, device_model::ExecMode::kTiming);
}

struct Traced {
  traces::Trace trace;
  device_model::RunResult result;

  // Slices of one nc0 timeline row ("TensorE", "DMA q0", ...), in the order they were recorded.
  std::vector<SliceRecord> row(const std::string& name) const {
    std::vector<SliceRecord> out;
    for (const SliceRecord& s : trace.slices) {
      const auto& t = trace.tracks.at(s.track);
      if (t.process == "nc0" && t.name == name) out.push_back(s);
    }
    return out;
  }
};

Traced run_traced(device_model::Device& dev, const device_model::Program& p) {
  traces::MemoryTraceSink sink;
  dev.set_trace_sink(&sink);
  Traced t;
  t.result = dev.run(0, p);
  dev.set_trace_sink(nullptr);
  t.trace = std::move(sink.trace());
  return t;
}

// `n` instructions on one stream, cycling through `body`.
device_model::Program repeat(const device_model::Device& dev, device_model::StreamId s,
                             const std::vector<Instruction>& body, int n) {
  kernels::ProgramBuilder b("repeat", dev.params().core);
  for (int i = 0; i < n; ++i) b.emit(s, body[i % body.size()]);
  return std::move(b).build();
}

// Steady-state initiation interval in engine cycles: start-to-start, skipping the first
// instruction (its LoadStationary or pipeline fill is not part of the steady state).
double ii_cycles(const std::vector<SliceRecord>& s, double hz) {
  if (s.size() < 3) return -1;
  const double ps = static_cast<double>((s.back().begin - s[1].begin).ps);
  return ps * 1e-12 * hz / static_cast<double>(s.size() - 2);
}

// The II of `body` repeated on `stream`, measured on the trace row `row`.
double measure_ii(device_model::Device& dev, device_model::StreamId stream, const std::string& row,
                  const std::vector<Instruction>& body, double hz, int n = 24) {
  const Traced t = run_traced(dev, repeat(dev, stream, body, n));
  const auto s = t.row(row);
  EXPECT_EQ(s.size(), static_cast<size_t>(n)) << row;
  return ii_cycles(s, hz);
}

// Per-instruction time from run durations alone: (T(2n) - T(n)) / n cancels every fixed cost
// (first LoadStationary, pipeline latency of the last instruction).
double cycles_from_durations(device_model::Device& dev, device_model::StreamId stream,
                             const std::vector<Instruction>& body, double hz, int n = 16) {
  const double t1 = static_cast<double>(dev.run(0, repeat(dev, stream, body, n)).duration().ps);
  const double t2 = static_cast<double>(dev.run(0, repeat(dev, stream, body, 2 * n)).duration().ps);
  return (t2 - t1) * 1e-12 * hz / n;
}

Instruction matmul(DType t, uint32_t m, uint32_t n, uint64_t stationary_offset = 0) {
  return isa::matmul(isa::psum_tile(DType::kFp32, m, 0, n),
                     isa::sbuf_tile(t, 128, stationary_offset, m),
                     isa::sbuf_tile(t, 128, 64 << 10, n), false);
}

// ---- TensorE ----

// ARCH-v2 "Performance Consideration": back-to-back MultiplyMoving reusing one stationary has
// II ~ max(N, MM_INIT_LATENCY); N = 512 (one PSUM bank of fp32) -> 512 TensorE cycles.
TEST(CostModelRules, TensorBf16MatmulN512TakesN512Cycles) {
  auto dev = timing_device();
  const double hz = dev->params().core.tensor.frequency_hz;
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kTensor, "TensorE", {matmul(DType::kBf16, 128, 512)}, hz), 512.0);
  EXPECT_WITHIN_5PCT(
      cycles_from_durations(*dev, kernels::kTensor, {matmul(DType::kBf16, 128, 512)}, hz), 512.0);
}

// ARCH-v2: FP32 matmul is "roughly 4x" the BF16 cost; ISA-2.26: 4 * max(min(64, M), N).
TEST(CostModelRules, TensorFp32MatmulCostsFourTimesBf16) {
  auto dev = timing_device();
  const double hz = dev->params().core.tensor.frequency_hz;
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kTensor, "TensorE", {matmul(DType::kFp32, 128, 512)}, hz),
      4 * 512.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kTensor, "TensorE", {matmul(DType::kFp32, 128, 100)}, hz),
      4 * 100.0);
}

// A regular (128-deep) FP8 x FP8 matmul runs at BF16 speed on both generations (SCHEMA
// adjusted_flops FP8 1.0x on Trn1; on Trn2 the 2x FP8 rate is the double-row mode's, below);
// mixed FP8 x BF16 runs at BF16 speed (glossary).
void expect_fp8_matmul_cycles(const std::string& preset, double fp8_cycles) {
  auto fp8_mm = [](DType moving) {
    return isa::matmul(isa::psum_tile(DType::kFp32, 128, 0, 512),
                       isa::sbuf_tile(DType::kFp8E4M3, 128, 0, 128),
                       isa::sbuf_tile(moving, 128, 64 << 10, 512), false);
  };
  auto dev = timing_device(preset);
  const double hz = dev->params().core.tensor.frequency_hz;
  for (DType moving : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kTensor, "TensorE", {fp8_mm(moving)}, hz),
                       fp8_cycles);
  }
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kTensor, "TensorE", {fp8_mm(DType::kBf16)}, hz),
                     512.0);
}

TEST(CostModelRules, TensorRegularFp8MatmulRunsAtBf16SpeedOnTrn2) {
  expect_fp8_matmul_cycles("trn2", 512.0);
}

TEST(CostModelRules, TensorFp8RunsAtBf16SpeedOnTrn1) {
  expect_fp8_matmul_cycles("trn1", 512.0);
}

// ARCH-v3 double FP8 (perf_mode=double_row, HARDWARE.md 1.2): stationary [128, 2, 128] and
// moving [128, 2, 512] contract 256 rows per instruction, "in the same amount of time as the
// regular BF16/FP16 LS/MM sequence with a 128 contraction dimension" (trn2
// tensor.fp8_double_row_cost_factor 1.0): 512 cycles per N = 512 instruction, so half the BF16
// time per contracted row (158 vs 79 TFLOP/s per core).
Instruction double_row_mm(DType st, DType mv) {
  return isa::matmul_double_row(isa::psum_tile(DType::kFp32, 128, 0, 512),
                                isa::sbuf(st, 0, 128, 0, {{128, 2}, {1, 128}}),
                                isa::sbuf(mv, 0, 128, 64 << 10, {{512, 2}, {1, 512}}), false);
}

TEST(CostModelRules, TensorFp8DoubleRowContracts256RowsInBf16TimeOnTrn2) {
  auto dev = timing_device("trn2");
  const double hz = dev->params().core.tensor.frequency_hz;
  for (DType mv : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    EXPECT_WITHIN_5PCT(
        measure_ii(*dev, kernels::kTensor, "TensorE", {double_row_mm(DType::kFp8E4M3, mv)}, hz),
        512.0);
  }
}

// The same GEMM (1024 x 2048 x 1024, K-major A, bf16 output) on trn2: the library's FP8 x FP8
// path issues double-row matmuls and takes ~0.5x the BF16 TensorE time (ARCH-v3 as above).
TEST(CostModelRules, Fp8DoubleRowGemmTakesHalfTheBf16TensorTimeOnTrn2) {
  auto dev = timing_device("trn2");
  auto tensor_busy_s = [&](DType in) {
    kernels::GemmSpec g;
    g.m = 1024, g.k = 2048, g.n = 1024;
    g.in_dtype = in;
    g.out_dtype = DType::kBf16;
    const device_model::Program p =
        kernels::build_gemm(g, {0, 8 << 20, 0, 16 << 20}, dev->params().core);
    double busy = 0;
    for (const SliceRecord& r : run_traced(*dev, p).row("TensorE")) {
      busy += static_cast<double>((r.end - r.begin).ps) * 1e-12;
    }
    return busy;
  };
  const double bf16 = tensor_busy_s(DType::kBf16), fp8 = tensor_busy_s(DType::kFp8E4M3);
  EXPECT_WITHIN_5PCT(fp8 / bf16, 0.5);
}

// Double row is validated: NeuronCore-v2 has no such mode (trn1 tensor.fp8_double_row_cost_factor
// 0; ARCH-v3 introduces it), and it takes FP8 x FP8 only. Both are a ValidationError naming the
// rule, not a silent regular matmul.
void expect_double_row_rejected(device_model::Device& dev, DType st, DType mv,
                                const std::string& says) {
  try {
    dev.run(0, repeat(dev, kernels::kTensor, {double_row_mm(st, mv)}, 1));
    ADD_FAILURE() << "double-row matmul was accepted";
  } catch (const device_model::ValidationError& e) {
    EXPECT_EQ(e.rule(), "matmul-perf-mode");
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(CostModelRules, DoubleRowIsRejectedOnTrn1) {
  auto dev = timing_device("trn1");
  expect_double_row_rejected(*dev, DType::kFp8E4M3, DType::kFp8E4M3, "not supported");
}

TEST(CostModelRules, DoubleRowIsRejectedForNonFp8InputsOnTrn2) {
  auto dev = timing_device("trn2");
  expect_double_row_rejected(*dev, DType::kBf16, DType::kBf16, "FP8 x FP8");
  expect_double_row_rejected(*dev, DType::kFp8E4M3, DType::kBf16, "FP8 x FP8");
}

// ISA-2.26 nc_matmul: max(min(64, N_stationary), N_moving) TensorE cycles for 16-bit inputs.
TEST(CostModelRules, TensorSmallMovingCostsMaxOfMinStationary64AndMoving) {
  auto dev = timing_device();
  const double hz = dev->params().core.tensor.frequency_hz;
  struct Case {
    uint32_t m, n;
    double rule;
  };
  for (const Case& c : {Case{128, 16, 64}, Case{128, 1, 64}, Case{32, 16, 32}, Case{16, 8, 16},
                        Case{128, 128, 128}, Case{64, 300, 300}}) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    EXPECT_WITHIN_5PCT(
        measure_ii(*dev, kernels::kTensor, "TensorE", {matmul(DType::kBf16, c.m, c.n)}, hz),
        c.rule);
  }
}

// ARCH-v2 "Background LoadStationary": the next stationary loads while the current MM runs, so
// a stream that changes stationary every matmul is bound by max(LS, MM). PERF Opt #7: short
// moving (M = 128, N = 1): LS ~ 128/4 = 32, MM ~ 64 -> one MM every ~64 cycles; short
// stationary (M = 1, N = 128): one MM every ~128 cycles.
TEST(CostModelRules, TensorBackgroundLoadStationaryKeepsAlternatingStationariesAtMaxLsMm) {
  auto dev = timing_device();
  const double hz = dev->params().core.tensor.frequency_hz;
  struct Case {
    uint32_t m, n;
    double rule;
  };
  for (const Case& c :
       {Case{128, 512, 512}, Case{128, 1, 64}, Case{1, 128, 128}, Case{128, 64, 64}}) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n));
    const std::vector<Instruction> alternating = {matmul(DType::kBf16, c.m, c.n, 0),
                                                  matmul(DType::kBf16, c.m, c.n, 4096)};
    const Traced t = run_traced(*dev, repeat(*dev, kernels::kTensor, alternating, 24));
    const auto mm = t.row("TensorE");
    const auto ls = t.row("TensorE (LoadStationary)");
    EXPECT_WITHIN_5PCT(ii_cycles(mm, hz), c.rule);
    // Every matmul loaded a stationary, and each load after the first overlapped the previous MM.
    ASSERT_EQ(ls.size(), mm.size());
    for (size_t i = 1; i < ls.size(); ++i) {
      EXPECT_LT(ls[i].begin, mm[i - 1].end) << "LoadStationary " << i << " did not overlap";
    }
  }
}

// Same rule with LS longer than MM: with fast LoadStationary disabled (speedup 1, so LS = M
// cycles), M = 128 and N = 64 give LS 128 > MM 64 and the stream runs at one MM per LS.
TEST(CostModelRules, TensorLoadStationaryBindsWhenLongerThanMultiplyMoving) {
  auto dev = timing_device("trn1", {"tensor.load_stationary_speedup=1"});
  const double hz = dev->params().core.tensor.frequency_hz;
  const std::vector<Instruction> alternating = {matmul(DType::kBf16, 128, 64, 0),
                                                matmul(DType::kBf16, 128, 64, 4096)};
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kTensor, "TensorE", alternating, hz), 128.0);
  // Reusing one stationary needs no load: back to MM-bound.
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kTensor, "TensorE", {matmul(DType::kBf16, 128, 64)}, hz), 64.0);
}

// ISA-2.26 nc_transpose on TensorE: max(P, min(64, F)) cycles over many back-to-back calls.
TEST(CostModelRules, TensorTransposeCostsMaxOfPAndMin64F) {
  auto dev = timing_device();
  const double hz = dev->params().core.tensor.frequency_hz;
  struct Case {
    uint32_t p, f;
    double rule;
  };
  for (const Case& c : {Case{128, 128, 128}, Case{32, 128, 64}, Case{32, 48, 48}, Case{16, 8, 16},
                        Case{128, 16, 128}}) {
    SCOPED_TRACE("P=" + std::to_string(c.p) + " F=" + std::to_string(c.f));
    const Instruction tr = isa::transpose(isa::psum_tile(DType::kFp32, c.f, 0, c.p),
                                          isa::sbuf_tile(DType::kBf16, c.p, 0, c.f));
    EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kTensor, "TensorE", {tr}, hz), c.rule);
  }
}

// SCHEMA mfu_estimated_percent: peak = 2 x PEs x clock = 2 * 128 * 128 * 2.8 GHz = 91.75
// TFLOPS on trn1 (ARCH-v2: 92). Full-size bf16 matmuls with changing stationaries reach it.
double measured_tensor_flops(device_model::Device& dev) {
  const std::vector<Instruction> body = {matmul(DType::kBf16, 128, 512, 0),
                                         matmul(DType::kBf16, 128, 512, 4096)};
  const Traced t = run_traced(dev, repeat(dev, kernels::kTensor, body, 64));
  const auto mm = t.row("TensorE");
  double flops = 0;
  for (const auto& s : mm) flops += s.args.value("flops", 0.0);
  EXPECT_DOUBLE_EQ(flops, 64 * 2.0 * 128 * 128 * 512);
  return flops / (mm.back().end - mm.front().begin).seconds();
}

TEST(CostModelRules, TensorPeakIs2x128x128xClockOnTrn1) {
  auto dev = timing_device("trn1");
  EXPECT_NEAR(dev->params().tensor_peak_flops(), 91.75e12, 0.01e12);
  EXPECT_WITHIN_5PCT(measured_tensor_flops(*dev), 91.75e12);
}

// trn2: 2 * 128 * 128 * 2.4 GHz = 78.64 TFLOPS (ARCH-v3: 79).
TEST(CostModelRules, TensorPeakIs2x128x128xClockOnTrn2) {
  auto dev = timing_device("trn2");
  EXPECT_NEAR(dev->params().tensor_peak_flops(), 78.64e12, 0.01e12);
  EXPECT_WITHIN_5PCT(measured_tensor_flops(*dev), 78.64e12);
}

// ---- VectorE ----

constexpr uint32_t kN = 2048;

Instruction vector_scalar(DType t, uint32_t n) {
  return isa::tensor_scalar(isa::sbuf_tile(t, 128, 96 << 10, n), isa::sbuf_tile(t, 128, 0, n),
                            AluOp::kMultiply, isa::imm(2.0f));
}

// ARCH-v2 VectorE cost model: one input tile ~N cycles (tensor_scalar), two ~2N (tensor_tensor);
// ISA-2.26 tensor_tensor: max(MIN_II, N) when one input is in PSUM.
TEST(CostModelRules, VectorOneInputCostsNAndTwoInputsCost2N) {
  auto dev = timing_device();
  const double hz = dev->params().core.vector.frequency_hz;
  const auto a = isa::sbuf_tile(DType::kFp32, 128, 0, kN);
  const auto b = isa::sbuf_tile(DType::kFp32, 128, 32 << 10, kN);
  const auto out = isa::sbuf_tile(DType::kFp32, 128, 96 << 10, kN);
  const auto in_psum = isa::psum_tile(DType::kFp32, 128, 0, kN);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {vector_scalar(DType::kFp32, kN)}, hz),
      double{kN});
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE", {isa::tensor_copy(out, a)}, hz),
                     double{kN});
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {isa::tensor_tensor(out, a, b, AluOp::kMax)}, hz),
                     2.0 * kN);
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {isa::tensor_tensor(out, a, in_psum, AluOp::kMax)}, hz),
                     double{kN});
  // ISA-2.26: all-BF16 SBUF add/subtract/multiply with contiguous tiles also costs N.
  const auto a16 = isa::sbuf_tile(DType::kBf16, 128, 0, kN);
  const auto b16 = isa::sbuf_tile(DType::kBf16, 128, 32 << 10, kN);
  const auto out16 = isa::sbuf_tile(DType::kBf16, 128, 96 << 10, kN);
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {isa::tensor_tensor(out16, a16, b16, AluOp::kAdd)}, hz),
                     double{kN});
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {isa::tensor_tensor(out16, a16, b16, AluOp::kMax)}, hz),
                     2.0 * kN);
  // The cost is per partition: 32 active lanes take as long as 128 (ARCH-v2).
  const auto a32 = isa::sbuf_tile(DType::kFp32, 32, 0, kN);
  const auto out32 = isa::sbuf_tile(DType::kFp32, 32, 96 << 10, kN);
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {isa::tensor_scalar(out32, a32, AluOp::kAdd, isa::imm(1))}, hz),
                     double{kN});
}

// ISA-2.26: MIN_II "is roughly 64 engine cycles": small tiles cost max(MIN_II, N).
TEST(CostModelRules, VectorSmallTilesCostMinIi64) {
  auto dev = timing_device();
  const double hz = dev->params().core.vector.frequency_hz;
  for (uint32_t n : {1u, 16u, 48u}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    EXPECT_WITHIN_5PCT(
        measure_ii(*dev, kernels::kVector, "VectorE", {vector_scalar(DType::kFp32, n)}, hz), 64.0);
  }
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {vector_scalar(DType::kFp32, 256)}, hz), 256.0);
}

// ISA-2.26 tensor_reduce: N/2 for bf16 in and out with add or max, else N.
TEST(CostModelRules, VectorTensorReduceBf16AddCostsHalfN) {
  auto dev = timing_device();
  const double hz = dev->params().core.vector.frequency_hz;
  auto reduce = [](DType t, ReduceOp op) {
    return isa::tensor_reduce(isa::sbuf_tile(t, 128, 96 << 10, 1), isa::sbuf_tile(t, 128, 0, 4096),
                              op);
  };
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {reduce(DType::kBf16, ReduceOp::kAdd)}, hz),
      2048.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {reduce(DType::kBf16, ReduceOp::kMax)}, hz),
      2048.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {reduce(DType::kFp32, ReduceOp::kAdd)}, hz),
      4096.0);
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kVector, "VectorE",
                                {reduce(DType::kBf16, ReduceOp::kMultiply)}, hz),
                     4096.0);
}

// ISA-2.26 memset on VectorE: max(MIN_II, N/2) for zero in bf16/fp16, else max(MIN_II, N).
TEST(CostModelRules, VectorMemsetBf16ZeroCostsHalfN) {
  auto dev = timing_device();
  const double hz = dev->params().core.vector.frequency_hz;
  auto memset = [](DType t, float v) { return isa::memset(isa::sbuf_tile(t, 128, 0, 4096), v); };
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {memset(DType::kBf16, 0.0f)}, hz), 2048.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {memset(DType::kFp16, 0.0f)}, hz), 2048.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {memset(DType::kBf16, 1.0f)}, hz), 4096.0);
  EXPECT_WITHIN_5PCT(
      measure_ii(*dev, kernels::kVector, "VectorE", {memset(DType::kFp32, 0.0f)}, hz), 4096.0);
}

// ARCH-v2 1.7: a minor-dim stride above 16 bytes halves the SBUF interface bandwidth ("roughly
// 50% performance hit"); 16 bytes or less runs at the peak 128 elements/cycle.
TEST(CostModelRules, SbufStrideAbove16BytesDoublesTime) {
  auto dev = timing_device();
  const double vhz = dev->params().core.vector.frequency_hz;
  const double shz = dev->params().core.scalar.frequency_hz;
  const auto out = isa::sbuf_tile(DType::kFp32, 128, 160 << 10, 1024);
  auto strided = [](int64_t stride) {
    return isa::sbuf(DType::kFp32, 0, 128, 0, {{stride, 1024}});
  };
  auto vec = [&](int64_t stride) {
    return measure_ii(*dev, kernels::kVector, "VectorE",
                      {isa::tensor_scalar(out, strided(stride), AluOp::kAdd, isa::imm(1))}, vhz);
  };
  EXPECT_WITHIN_5PCT(vec(1), 1024.0);
  EXPECT_WITHIN_5PCT(vec(4), 1024.0);       // 16 B
  EXPECT_WITHIN_5PCT(vec(8), 2 * 1024.0);   // 32 B
  EXPECT_WITHIN_5PCT(vec(32), 2 * 1024.0);  // 128 B
  EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kScalar, "ScalarE",
                                {isa::activation(out, strided(8), ActFunc::kExp)}, shz),
                     2 * 1024.0);
}

// ARCH-v3 VectorE performance mode on NC-v3 (trn2): 4x for tensor_copy / tensor_scalar with
// input and output in SBUF, BF16/FP16 and contiguous; 2x when one side is in PSUM or the inner
// dim is not contiguous; 2x for tensor_tensor with both inputs in SBUF and all tensors 16-bit.
// FP32 gets no performance mode.
TEST(CostModelRules, Trn2VectorPerformanceMode) {
  auto dev = timing_device("trn2");
  const double hz = dev->params().core.vector.frequency_hz;
  const uint32_t n = 4096;
  const auto a = isa::sbuf_tile(DType::kBf16, 128, 0, n);
  const auto b = isa::sbuf_tile(DType::kBf16, 128, 16 << 10, n);
  const auto out = isa::sbuf_tile(DType::kBf16, 128, 32 << 10, n);
  auto ii = [&](const Instruction& in) {
    return measure_ii(*dev, kernels::kVector, "VectorE", {in}, hz);
  };
  EXPECT_WITHIN_5PCT(ii(isa::tensor_copy(out, a)), n / 4.0);
  EXPECT_WITHIN_5PCT(ii(isa::tensor_scalar(out, a, AluOp::kMultiply, isa::imm(3))), n / 4.0);
  EXPECT_WITHIN_5PCT(ii(isa::tensor_copy(out, isa::psum_tile(DType::kBf16, 128, 0, n))), n / 2.0);
  EXPECT_WITHIN_5PCT(ii(isa::tensor_copy(out, isa::sbuf(DType::kBf16, 0, 128, 64 << 10, {{2, n}}))),
                     n / 2.0);
  // NC-v2 tensor_tensor (max) is 2N; performance mode halves it.
  EXPECT_WITHIN_5PCT(ii(isa::tensor_tensor(out, a, b, AluOp::kMax)), 2.0 * n / 2);
  const auto f32 = isa::sbuf_tile(DType::kFp32, 128, 64 << 10, n);
  const auto f32_out = isa::sbuf_tile(DType::kFp32, 128, 128 << 10, n);
  EXPECT_WITHIN_5PCT(ii(isa::tensor_copy(f32_out, f32)), double{n});
}

// ---- ScalarE / GpSimdE ----

// ISA-2.26 activation: max(MIN_II, N); activation with a reduction adds ActReadAccumulator,
// "roughly 64 ScalarE cycles on NeuronCore-v2" (ARCH-v2): max(MIN_II, N) + MIN_II.
TEST(CostModelRules, ScalarActivationCostsMaxMinIiNPlus64WithAccumulate) {
  auto dev = timing_device();
  const double hz = dev->params().core.scalar.frequency_hz;
  auto act = [](uint32_t n, bool accumulate) {
    Instruction in = isa::activation(isa::sbuf_tile(DType::kFp32, 128, 96 << 10, n),
                                     isa::sbuf_tile(DType::kFp32, 128, 0, n), ActFunc::kGelu);
    if (accumulate) {
      in.has_acc_dst = true;
      in.acc_dst = isa::sbuf_tile(DType::kFp32, 128, 190 << 10, 1);
    }
    return in;
  };
  auto ii = [&](uint32_t n, bool acc) {
    return measure_ii(*dev, kernels::kScalar, "ScalarE", {act(n, acc)}, hz);
  };
  EXPECT_WITHIN_5PCT(ii(1024, false), 1024.0);
  EXPECT_WITHIN_5PCT(ii(16, false), 64.0);
  EXPECT_WITHIN_5PCT(ii(1024, true), 1024.0 + 64);
  EXPECT_WITHIN_5PCT(ii(16, true), 64.0 + 64);
  EXPECT_WITHIN_5PCT(cycles_from_durations(*dev, kernels::kScalar, {act(1024, false)}, hz), 1024.0);
}

// PERF Opt #5a: back-to-back 1-element ScalarE instructions that each read the previous one's
// output issue every ~189 ns = 264 ScalarE cycles on NC-v2 (222 ns = 266 cycles on NC-v3 in the
// current guide).
double dependent_chain_ii_ns(device_model::Device& dev) {
  const auto x = isa::sbuf_tile(DType::kFp32, 128, 0, 1);
  const auto y = isa::sbuf_tile(DType::kFp32, 128, 64, 1);
  const std::vector<Instruction> ping_pong = {
      isa::tensor_scalar(y, x, AluOp::kMultiply, isa::imm(1.5f), AluOp::kAdd, isa::imm(1)),
      isa::tensor_scalar(x, y, AluOp::kMultiply, isa::imm(1.5f), AluOp::kAdd, isa::imm(1))};
  const Traced t = run_traced(dev, repeat(dev, kernels::kScalar, ping_pong, 32));
  return ii_cycles(t.row("ScalarE"), 1e9);  // cycles of a 1 GHz clock = ns
}

TEST(CostModelRules, ScalarDependentOneElementChainIssuesEvery264CyclesOnTrn1) {
  auto dev = timing_device("trn1");
  const double ns = dependent_chain_ii_ns(*dev);
  EXPECT_WITHIN_5PCT(ns, 189.0);
  EXPECT_WITHIN_5PCT(ns * dev->params().core.scalar.frequency_hz * 1e-9, 264.0);
}

TEST(CostModelRules, ScalarDependentOneElementChainIssuesEvery266CyclesOnTrn2) {
  auto dev = timing_device("trn2");
  const double ns = dependent_chain_ii_ns(*dev);
  EXPECT_WITHIN_5PCT(ns, 222.0);
  EXPECT_WITHIN_5PCT(ns * dev->params().core.scalar.frequency_hz * 1e-9, 266.0);
}

// ISA-2.26 iota: 150 + N GpSimd cycles (GPSIMD_START ~150).
TEST(CostModelRules, GpSimdIotaCosts150PlusN) {
  auto dev = timing_device();
  const double hz = dev->params().core.gpsimd.frequency_hz;
  for (uint32_t n : {64u, 1024u, 4096u}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    const Instruction in = isa::iota(isa::sbuf_tile(DType::kInt32, 128, 0, n), 0, 1, {1});
    EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kGpSimd, "GpSimdE", {in}, hz), 150.0 + n);
  }
}

// ---- SCALE-Sim compatibility mode ----

// SCALE-Sim WS (scalesim 3.0.0 compute/systolic_compute_ws.py, HARDWARE.md 7): a fold loads its
// weights (R), streams T rows, drains C - 1 and skews R - 1: 2R + C + T - 2 cycles, folds one
// after the other. A matmul with a new stationary starts a fold; alternating stationaries make
// every matmul a fold of T = the moving free size.
TEST(CostModelRules, ScaleSimModeChargesAFoldPerNewStationary) {
  auto dev = timing_device("trn1", {"tensor.timing_mode=scalesim"});
  const double hz = dev->params().core.tensor.frequency_hz;
  const double R = 128, C = 128;
  for (uint32_t t : {512u, 64u, 1u}) {
    SCOPED_TRACE("T=" + std::to_string(t));
    const std::vector<Instruction> alternating = {matmul(DType::kBf16, 128, t, 0),
                                                  matmul(DType::kBf16, 128, t, 4096)};
    EXPECT_WITHIN_5PCT(measure_ii(*dev, kernels::kTensor, "TensorE", alternating, hz),
                       2 * R + C + t - 2);
  }
}

// ... and matmuls that keep the stationary stream more rows of the same fold: one fold of
// T = 4 x 512 rows in four moving tiles costs one fill. SCALE-Sim's Total Cycles for F folds is
// F (2R + C + T - 2) - 1 (the last output's cycle index + 1; checked against SCALE-Sim 3.0.0 by
// tests/python/test_scalesim_parity.py), so TensorE's cycle count for this fold is 2R + C + T - 3.
TEST(CostModelRules, ScaleSimModeStreamsAFoldOnceAndMatchesScaleSimCount) {
  auto dev = timing_device("trn1", {"tensor.timing_mode=scalesim"});
  const double R = 128, C = 128, T = 4 * 512;
  dev->run(0, repeat(*dev, kernels::kTensor, {matmul(DType::kBf16, 128, 512, 0)}, 4));
  EXPECT_EQ(dev->stats().value("nc0.tensor.busy_cycles"), 2 * R + C + T - 3);
}

// ---- DMA ----

// One DMA transfer's data phase: the slice on its queue's row (launch latency excluded).
double dma_slice_ns(device_model::Device& dev, const Instruction& copy) {
  const Traced t = run_traced(dev, repeat(dev, kernels::dma_queue(0), {copy}, 1));
  const auto s = t.row("DMA q0");
  EXPECT_EQ(s.size(), 1u);
  return s.empty() ? -1 : (s[0].end - s[0].begin).ns();
}

// DMA-OVERVIEW Example 1 (trn2): A[4, 4096] bf16 HBM -> SBUF uses one DMA engine (4 of its 8
// partitions) and takes 1416 ns for 32 KiB = 23.1 B/ns. An 8-partition x 4 KiB transfer is the
// same 32 KiB on one engine.
TEST(CostModelRules, DmaOneEngine32KiBHbmToSbufTakes1416nsOnTrn2) {
  auto dev = timing_device("trn2");
  EXPECT_WITHIN_5PCT(
      dma_slice_ns(*dev, isa::dma_copy(isa::sbuf_tile(DType::kBf16, 4, 0, 4096),
                                       isa::hbm_rows(DType::kBf16, 0, 4, 4096, 4096))),
      1416.0);
  EXPECT_WITHIN_5PCT(
      dma_slice_ns(*dev, isa::dma_copy(isa::sbuf_tile(DType::kBf16, 8, 0, 2048),
                                       isa::hbm_rows(DType::kBf16, 0, 8, 2048, 2048))),
      1416.0);
}

// DMA-BW: "every DMA transfer incurs descriptor setup, synchronization, and semaphore-to-start
// latency (~1300 ns cross-engine)". A tiny transfer triggered by another engine's semaphore
// completes ~1300 ns after that semaphore is set.
TEST(CostModelRules, DmaSmallTransferAfterSemaphoreCosts1300ns) {
  auto dev = timing_device("trn2");
  const auto& core = dev->params().core;
  const double vector_latency_ns =
      core.vector.pipeline_latency_cycles / core.vector.frequency_hz * 1e9;
  struct Case {
    const char* what;
    Instruction copy;
  };
  const auto tile = isa::sbuf_tile(DType::kFp32, 1, 0, 16);  // 64 B
  for (const Case& c :
       {Case{"SBUF -> HBM", isa::dma_copy(isa::hbm_rows(DType::kFp32, 0, 1, 16, 16), tile)},
        Case{"HBM -> SBUF", isa::dma_copy(isa::sbuf_tile(DType::kFp32, 1, 4096, 16),
                                          isa::hbm_rows(DType::kFp32, 0, 1, 16, 16))},
        Case{"SBUF -> SBUF", isa::dma_copy(isa::sbuf_tile(DType::kFp32, 1, 4096, 16), tile)}}) {
    SCOPED_TRACE(c.what);
    kernels::ProgramBuilder b("after_semaphore", core);
    b.emit(kernels::kVector, isa::memset(tile, 1.0f));
    b.wait(kernels::dma_queue(0), b.mark(kernels::kVector));
    b.emit(kernels::dma_queue(0), c.copy);
    const Traced t = run_traced(*dev, std::move(b).build());
    const auto producer = t.row("VectorE");
    const auto dma = t.row("DMA q0");
    ASSERT_EQ(producer.size(), 1u);
    ASSERT_EQ(dma.size(), 1u);
    const double sem_set_ns = producer[0].end.ns() + vector_latency_ns;
    EXPECT_WITHIN_5PCT(dma[0].end.ns() - sem_set_ns, 1300.0);
  }
}

// DMA-BW: below 256 B per partition a transfer is "severely overhead-bound" (a small fraction
// of peak); at >= 4 KiB per partition it "saturates the DMA engines" at their per-engine peak,
// 23 B/ns on trn2. Measured on 128-partition transfers (16 engines) of one queue, back to back
// (the best case: the launch latency is paid once) and one at a time after a semaphore.
double per_engine_bytes_per_ns(device_model::Device& dev, uint32_t bytes_per_partition,
                               bool after_semaphore) {
  const uint32_t cols = bytes_per_partition / 2;
  const Instruction copy = isa::dma_copy(isa::sbuf_tile(DType::kBf16, 128, 0, cols),
                                         isa::hbm_rows(DType::kBf16, 0, 128, cols, cols));
  const int n = 8;
  kernels::ProgramBuilder b("copies", dev.params().core);
  const auto q = kernels::dma_queue(0);
  for (int i = 0; i < n; ++i) {
    if (after_semaphore) {
      b.emit(kernels::kVector, isa::memset(isa::sbuf_tile(DType::kFp32, 128, 200 << 10, 1), 0));
      b.wait(q, b.mark(kernels::kVector));
    }
    b.emit(q, copy);
    if (after_semaphore) b.wait(kernels::kVector, b.mark(q));
  }
  const Traced t = run_traced(dev, std::move(b).build());
  const double engines = dev.params().core.dma.engines;
  const double bytes = double{n} * 128 * bytes_per_partition;
  if (after_semaphore) return bytes / engines / t.result.duration().ns();
  const auto s = t.row("DMA q0");
  return bytes / engines / (s.back().end - s.front().begin).ns();
}

TEST(CostModelRules, DmaSmallPartitionsAreOverheadBoundLargeOnesSaturateTrn2) {
  auto dev = timing_device("trn2");
  const double peak = 23.0;  // B/ns per engine (DMA-BW table, trn2)
  for (uint32_t b : {64u, 128u, 254u}) {
    SCOPED_TRACE(std::to_string(b) + " B/partition");
    EXPECT_LT(per_engine_bytes_per_ns(*dev, b, false), peak / 3);
    EXPECT_LT(per_engine_bytes_per_ns(*dev, b, true), peak / 10);
  }
  for (uint32_t b : {4096u, 8192u, 16384u, 65536u}) {
    SCOPED_TRACE(std::to_string(b) + " B/partition");
    EXPECT_WITHIN_5PCT(per_engine_bytes_per_ns(*dev, b, false), peak);
  }
  // Large transfers amortise even the launch latency.
  EXPECT_GT(per_engine_bytes_per_ns(*dev, 65536, true), 0.85 * peak);
}

// A tensor stored transposed relative to its SBUF tile: int32 [512 rows, 128] in HBM loaded as
// [128 partitions, 512] (the HBM tensor's contiguous dim becomes the partition dim), one element
// per contiguous run.
Instruction transposed_int32_load() {
  AccessPattern src = isa::hbm_rows(DType::kInt32, 0, 128, 512, 1);
  src.dims[0].stride = 128;
  return isa::dma_copy(isa::sbuf_tile(DType::kInt32, 128, 0, 512), src);
}

// ARCH-v3 "DMA Transpose": Trainium2 DMA engines transpose 2- and 4-byte data from HBM into
// SBUF "up to 90% DMA throughput utilization", the 16 engines cooperating: the data phase is the
// packets of the moved bytes plus the bytes at 90% of 16 x 27.2 GB/s, not a descriptor per element.
TEST(CostModelRules, DmaTransposeMovesInt32At90PercentOnTrn2) {
  auto dev = timing_device("trn2");
  const auto& d = dev->params().core.dma;
  const double bytes = 128.0 * 512 * 4;
  const double packets_per_engine = std::ceil(bytes / d.packet_bytes / d.engines);
  const double rule_ns = packets_per_engine * d.descriptor_overhead_ns +
                         bytes / (d.engines * d.engine_bandwidth_bytes_per_s * 0.9) * 1e9;
  EXPECT_WITHIN_5PCT(dma_slice_ns(*dev, transposed_int32_load()), rule_ns);
}

// NC-v2 has no DMA transpose (it came with Trainium2, ARCH-v3): the transfer's descriptors carry
// its stride pattern (nki-dge.rst), one per partition row, and each element is one access of
// dma.strided_access_bytes (assumption: a 64-byte burst). Far faster than a descriptor per
// element, far slower than a contiguous load (PERF Opt #10: "much lower DMA bandwidth").
TEST(CostModelRules, DmaStridedDescriptorsMoveTransposedInt32OnTrn1) {
  auto dev = timing_device("trn1");
  const auto& d = dev->params().core.dma;
  const double elements = 128.0 * 512, access = d.strided_access_bytes;
  const double packets_per_engine =
      std::ceil(128.0 * std::ceil(512 * access / d.packet_bytes) / d.engines);
  // Each element moves 4 bytes through the engines but `access` bytes through HBM, which binds.
  const double rate = std::min(d.engines * d.engine_bandwidth_bytes_per_s * 4 / access,
                               dev->params().hbm.bandwidth_bytes_per_s * 4 / access);
  const double rule_ns = packets_per_engine * d.descriptor_overhead_ns + elements * 4 / rate * 1e9;
  const double measured = dma_slice_ns(*dev, transposed_int32_load());
  EXPECT_WITHIN_5PCT(measured, rule_ns);
  const double per_element_descriptors_ns = elements / d.engines * d.descriptor_overhead_ns;
  EXPECT_LT(measured * 5, per_element_descriptors_ns);
}

// ---- Logical NeuronCores ----

// HARDWARE.md 1.10 (Neuron docs `logical-neuroncore-config.rst`, `nki/get-started/about/lnc.rst`):
// on trn2 a logical NeuronCore (LNC=2, the default) is two physical NeuronCore-v3 sharing one
// HBM stack and address space, and an NKI kernel launched as kernel[2] runs one program instance
// on each (nl.program_id() 0/1). So a TensorE-bound GEMM split across the pair takes half the
// one-core time: 4096^3 bf16 (1.75 ms of TensorE per core alone) is ~0.5x, within 10%, with the
// stack's bandwidth (725 GB/s, shared by both cores' DMA) to spare.
TEST(CostModelRules, Trn2LogicalCoreRunsAGemmOnBothCoresInHalfTheTime) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 2);
  const auto& p = dev->params();
  ASSERT_EQ(p.logical_core_size, 2u);
  const int64_t n = 4096;
  const uint64_t bytes = uint64_t(n) * n * 2;
  // A^T [k, m], B [k, n], C [m, n] (NKI's matmul layout, as build_gemm takes them).
  const kernels::TensorDesc a{0, DType::kBf16, {n, n}, {1, n}};
  const kernels::TensorDesc b{bytes, DType::kBf16, {n, n}, {n, 1}};
  const kernels::TensorDesc c{2 * bytes, DType::kBf16, {n, n}, {n, 1}};
  const auto one = kernels::build_matmul_grid("gemm", a, b, c, std::nullopt, {}, p.core, 1);
  const auto two = kernels::build_matmul_grid("gemm", a, b, c, std::nullopt, {}, p.core, 2);
  ASSERT_EQ(one.grid, 1u);
  ASSERT_EQ(two.grid, 2u);
  const double t1 = dev->run(0, one).duration().seconds();
  const Traced t = run_traced(*dev, two);
  const double t2 = t.result.duration().seconds();
  EXPECT_NEAR(t2 / t1, 0.5, 0.05) << "LNC=1 " << t1 * 1e3 << " ms, LNC=2 " << t2 * 1e3 << " ms";
  std::printf(
      "4096^3 bf16 on trn2: one core %.3f ms, both cores of the logical core %.3f ms (%.3fx)\n",
      t1 * 1e3, t2 * 1e3, t2 / t1);
  // One launch, both physical cores busy with TensorE for most of it, ending together.
  ASSERT_EQ(t.result.cores.size(), 1u);
  const auto& r = t.result.cores[0];
  EXPECT_EQ(r.grid, 2u);
  ASSERT_EQ(r.instance_end.size(), 2u);
  double flops = 0;
  for (const std::string row : {"TensorE", "pcore1 TensorE"}) {
    SCOPED_TRACE(row);
    const auto mm = t.row(row);
    ASSERT_FALSE(mm.empty());
    double busy = 0, f = 0;
    for (const auto& s : mm) busy += (s.end - s.begin).seconds(), f += s.args.value("flops", 0.0);
    EXPECT_GT(busy, 0.85 * t2);
    EXPECT_NEAR(f, double(n) * n * n, 0.01 * double(n) * n * n);  // half the GEMM's 2n^3
    flops += f;
  }
  EXPECT_DOUBLE_EQ(flops, 2.0 * n * n * n);
}

}  // namespace
}  // namespace neuronsim
