// Logical NeuronCores of several physical cores (HARDWARE.md 1.10; Neuron docs
// `logical-neuroncore-config.rst`, `nki/get-started/about/lnc.rst`): trn2's LNC=2 pairs two
// physical cores sharing one HBM stack; an NKI kernel[2] launch runs program instance p
// (nl.program_id()) on physical core p, and the instances meet with nisa.core_barrier. trn1 has
// no logical core grouping, so it runs grid 1 only. Note [LNC launch] in device.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/device_model/program_json.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/spmd.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;
using device_model::EngineKind;
using device_model::Program;
using device_model::StreamId;
namespace isa = device_model::isa;

// A grid-`grid` program whose instance p memsets an SBUF tile on VectorE.
Program tiny_grid(uint32_t grid) {
  Program p;
  p.name = "tiny";
  p.grid = grid;
  for (uint32_t i = 0; i < grid; ++i) {
    p.stream({EngineKind::kVector, 0, static_cast<uint8_t>(i)})
        .instructions.push_back(isa::memset(isa::sbuf_tile(DType::kFp32, 128, 0, 64), 1.0f));
  }
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const device_model::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Lnc, Trn1RejectsAGridOfTwoAndStaysUsable) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming, 2);
  ASSERT_EQ(dev->params().logical_core_size, 1u);
  const std::string msg = error_of([&] { dev->run(0, tiny_grid(2)); });
  EXPECT_NE(msg.find("rule 'grid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("grid 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 1 (chip.logical_core_size)"), std::string::npos) << msg;
  // Nothing stays queued: the same cores run a grid-1 program next.
  EXPECT_EQ(dev->run(0, tiny_grid(1)).cores.size(), 1u);
  EXPECT_EQ(dev->run(1, tiny_grid(1)).cores.size(), 1u);
}

TEST(Lnc, Trn2RejectsBadGridsWithClearErrors) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 4);
  ASSERT_EQ(dev->params().logical_core_size, 2u);
  std::string msg = error_of([&] { dev->run(0, tiny_grid(3)); });
  EXPECT_NE(msg.find("grid 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 2 (chip.logical_core_size)"), std::string::npos) << msg;
  // A grid launch starts on the first physical core of a logical core.
  msg = error_of([&] { dev->run(1, tiny_grid(2)); });
  EXPECT_NE(msg.find("not on physical core 1"), std::string::npos) << msg;
  // A stream of an instance beyond the grid.
  Program p = tiny_grid(1);
  p.stream({EngineKind::kVector, 0, 1}).instructions.push_back(isa::sem_signal(0));
  msg = error_of([&] { dev->run(0, p); });
  EXPECT_NE(msg.find("rule 'grid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("program instance 1 in a launch of grid 1"), std::string::npos) << msg;
  // A signal to an instance beyond the grid; a wait naming an instance.
  p = tiny_grid(2);
  auto sig = isa::sem_signal(0);
  sig.sem_pcore = 2;
  p.stream({EngineKind::kVector, 0, 1}).instructions.push_back(sig);
  msg = error_of([&] { dev->run(0, p); });
  EXPECT_NE(msg.find("rule 'semaphore-pcore'"), std::string::npos) << msg;
  p = tiny_grid(2);
  auto wait = isa::sem_wait(0, 1);
  wait.sem_pcore = 1;
  p.stream({EngineKind::kVector, 0, 0}).instructions.push_back(wait);
  msg = error_of([&] { dev->run(0, p); });
  EXPECT_NE(msg.find("rule 'semaphore-pcore'"), std::string::npos) << msg;
}

TEST(Lnc, Trn2GridNeedsBothPhysicalCoresElaborated) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 1);
  const std::string msg = error_of([&] { dev->run(0, tiny_grid(2)); });
  EXPECT_NE(msg.find("only 1 of the logical core's physical cores are elaborated"),
            std::string::npos)
      << msg;
}

// nisa.core_barrier as a sendrecv through the shared HBM: instance 0 writes a tile, both pass
// the barrier, instance 1 reads it back and stores it elsewhere. Without the barrier instance 1
// would read before the write landed.
TEST(Lnc, CoreBarrierOrdersTheTwoCoresOfALogicalCore) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kFull, 2);
  const auto& core = dev->params().core;
  const uint64_t x = 1 << 20, y = 2 << 20;
  const auto tile = isa::sbuf_tile(DType::kFp32, 128, 0, 256);
  const auto at = [](uint64_t a) { return isa::hbm_rows(DType::kFp32, a, 128, 256, 256); };
  kernels::ProgramBuilder b0("sendrecv", core), b1("sendrecv", core);
  b0.emit(kernels::kVector, isa::memset(tile, 7.0f));
  b0.wait(kernels::dma_queue(0), b0.mark(kernels::kVector));
  b0.emit(kernels::dma_queue(0), isa::dma_copy(at(x), tile));
  b1.emit(kernels::kVector, isa::memset(tile, -1.0f));
  b1.wait(kernels::dma_queue(0), b1.mark(kernels::kVector));
  Program p0 = std::move(b0).build(), p1 = std::move(b1).build();
  Program p = kernels::join_instances("sendrecv", {p0, p1});
  kernels::core_barrier(p, kernels::dma_queue(0), core.semaphores);
  // After the barrier, instance 1: x -> SBUF -> y.
  auto& s1 = p.stream({EngineKind::kDma, 0, 1}).instructions;
  s1.push_back(isa::dma_copy(tile, at(x)));
  s1.push_back(isa::sem_signal(40));
  s1.push_back(isa::sem_wait(40, 1));
  s1.push_back(isa::dma_copy(at(y), tile));
  std::memset(dev->hbm_data() + x, 0, 128 * 256 * 4);
  std::memset(dev->hbm_data() + y, 0, 128 * 256 * 4);
  traces::MemoryTraceSink sink;
  dev->set_trace_sink(&sink);
  const auto r = dev->run(0, p);
  dev->set_trace_sink(nullptr);
  const float* out = reinterpret_cast<const float*>(dev->hbm_data() + y);
  for (int i = 0; i < 128 * 256; ++i) ASSERT_EQ(out[i], 7.0f) << i;
  // pcore 1's first read starts after pcore 0's write ended.
  double write_end = -1, read_begin = -1;
  for (const auto& s : sink.trace().slices) {
    const auto& t = sink.trace().tracks.at(s.track);
    if (t.process != "nc0") continue;
    if (t.name == "DMA q0" && write_end < 0) write_end = s.end.ns();
    if (t.name == "pcore1 DMA q0" && read_begin < 0) read_begin = s.begin.ns();
  }
  ASSERT_GT(write_end, 0);
  EXPECT_GE(read_begin, write_end);
  ASSERT_EQ(r.cores.size(), 1u);
  EXPECT_EQ(r.cores[0].grid, 2u);
}

TEST(Lnc, AnUnsignalledCrossCoreWaitIsADeadlockNamingBothCores) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 2);
  Program p = tiny_grid(2);
  p.stream({EngineKind::kVector, 0, 1}).instructions.push_back(isa::sem_wait(5, 1));
  const std::string msg = error_of([&] { dev->run(0, p); });
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nc1: VectorE at instruction 1 waits for semaphore 5"), std::string::npos)
      << msg;
  EXPECT_EQ(dev->run(0, tiny_grid(2)).cores.at(0).grid, 2u);  // usable again
}

TEST(Lnc, GridProgramsRoundTripThroughJson) {
  Program p = tiny_grid(2);
  auto sig = isa::sem_signal(3);
  sig.sem_pcore = 0;
  p.stream({EngineKind::kDma, 2, 1}).instructions.push_back(sig);
  const std::string text = device_model::program_to_json(p).dump();
  EXPECT_NE(text.find("\"pcore1.dma2\""), std::string::npos) << text;
  const Program q = device_model::parse_program(text);
  EXPECT_EQ(q.grid, 2u);
  ASSERT_EQ(q.streams.size(), p.streams.size());
  EXPECT_EQ(device_model::program_to_json(q).dump(), text);
  for (const char* bad :
       {"pcore0.tensor", "pcore01.tensor", "pcore1.pcore1.tensor", "pcore.dma0"}) {
    EXPECT_FALSE(device_model::parse_stream_id(bad)) << bad;
  }
}

// Values do not depend on the grid: each output element is computed by the single-core
// kernel's instructions, on one of the two cores.
std::vector<float> pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + seed * 11) % 29) / 8.0f - 1.5f;
  return v;
}

TEST(Lnc, SplitMatmulAndElementwiseComputeWhatOneCoreComputes) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kFull, 2);
  const auto& core = dev->params().core;
  uint8_t* hbm = dev->hbm_data();
  auto put = [&](uint64_t at, const std::vector<float>& v) {
    std::memcpy(hbm + at, v.data(), v.size() * 4);
  };
  auto get = [&](uint64_t at, size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), hbm + at, n * 4);
    return v;
  };
  // Matmul: M = 384 (three 128-row blocks: 2 + 1), K = 256, N = 640.
  const int64_t m = 384, k = 256, n = 640;
  const auto av = pattern(m * k, 1), bv = pattern(k * n, 2);
  put(0, av);
  put(1 << 20, bv);
  const kernels::TensorDesc a{0, DType::kFp32, {m, k}, {k, 1}};
  const kernels::TensorDesc b{1 << 20, DType::kFp32, {k, n}, {n, 1}};
  const kernels::TensorDesc c1{4 << 20, DType::kFp32, {m, n}, {n, 1}};
  kernels::TensorDesc c2 = c1;
  c2.address = 8 << 20;
  const Program one = kernels::build_matmul_grid("mm", a, b, c1, std::nullopt, {}, core, 1);
  const Program two = kernels::build_matmul_grid("mm", a, b, c2, std::nullopt, {}, core, 2);
  ASSERT_EQ(two.grid, 2u);
  EXPECT_GT(two.instruction_count(0), 0u);
  EXPECT_GT(two.instruction_count(1), 0u);
  dev->run(0, one);
  dev->run(0, two);
  const auto r1 = get(c1.address, m * n), r2 = get(c2.address, m * n);
  EXPECT_EQ(std::memcmp(r1.data(), r2.data(), r1.size() * 4), 0);
  for (int64_t i = 0; i < m; i += 97) {
    for (int64_t j = 0; j < n; j += 61) {
      double ref = 0;
      for (int64_t x = 0; x < k; ++x) ref += double(av[i * k + x]) * bv[x * n + j];
      EXPECT_NEAR(r2[i * n + j], ref, 1e-3 * (1 + std::fabs(ref))) << i << "," << j;
    }
  }
  // Elementwise: out[300, 1024] = x * y + bias[1024] (bias broadcast over rows).
  const int64_t rows = 300, cols = 1024;
  const auto xv = pattern(rows * cols, 3), yv = pattern(rows * cols, 4), bias = pattern(cols, 5);
  put(16 << 20, xv);
  put(20 << 20, yv);
  put(24 << 20, bias);
  const std::vector<kernels::TensorDesc> ins = {{16 << 20, DType::kFp32, {rows, cols}, {cols, 1}},
                                                {20 << 20, DType::kFp32, {rows, cols}, {cols, 1}},
                                                {24 << 20, DType::kFp32, {cols}, {1}}};
  kernels::Expr e;
  const auto prod =
      e.alu(device_model::AluOp::kMultiply, kernels::Arg::input(0), kernels::Arg::input(1));
  e.alu(device_model::AluOp::kAdd, prod, kernels::Arg::input(2));
  const kernels::TensorDesc o1{28 << 20, DType::kFp32, {rows, cols}, {cols, 1}};
  kernels::TensorDesc o2 = o1;
  o2.address = 32 << 20;
  const Program e1 = kernels::build_elementwise_grid("ew", ins, o1, e, core, 1);
  const Program e2 = kernels::build_elementwise_grid("ew", ins, o2, e, core, 2);
  ASSERT_EQ(e2.grid, 2u);
  dev->run(0, e1);
  dev->run(0, e2);
  const auto w1 = get(o1.address, rows * cols), w2 = get(o2.address, rows * cols);
  EXPECT_EQ(std::memcmp(w1.data(), w2.data(), w1.size() * 4), 0);
  for (int64_t i = 0; i < rows * cols; i += 1009) {
    EXPECT_EQ(w2[i], xv[i] * yv[i] + bias[i % cols]) << i;
  }
  // Too little work for two cores: one.
  const kernels::TensorDesc small{28 << 20, DType::kFp32, {64, 64}, {64, 1}};
  EXPECT_EQ(kernels::build_copy_grid("copy", small, small, core, 2).grid, 1u);
}

}  // namespace
}  // namespace neuronsim
