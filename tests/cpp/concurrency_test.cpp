// Engines, DMA queues and cores running at the same time: overlap, semaphore ordering, shared
// bandwidth, deadlock reports (HARDWARE.md 1.6: four independent instruction streams synchronised
// by hardware semaphores; 1.8-1.9: DMA queues share engines and HBM stacks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::ActFunc;
using device_model::AluOp;
using device_model::DType;
using traces::SliceRecord;
namespace isa = device_model::isa;

struct Traced {
  traces::Trace trace;
  device_model::RunResult result;

  std::vector<SliceRecord> row(const std::string& name, const std::string& process = "nc0") const {
    std::vector<SliceRecord> out;
    for (const SliceRecord& s : trace.slices) {
      const auto& t = trace.tracks.at(s.track);
      if (t.process == process && t.name == name) out.push_back(s);
    }
    return out;
  }
  double busy_ns(const std::string& name) const {
    double ns = 0;
    for (const auto& s : row(name)) ns += (s.end - s.begin).ns();
    return ns;
  }
};

Traced run_traced(device_model::Device& dev, const std::vector<device_model::Program>& per_core,
                  const std::vector<uint32_t>& cores = {0}) {
  traces::MemoryTraceSink sink;
  dev.set_trace_sink(&sink);
  for (size_t i = 0; i < cores.size(); ++i) dev.submit(cores[i], per_core[i]);
  Traced t;
  t.result = dev.run();
  dev.set_trace_sink(nullptr);
  t.trace = std::move(sink.trace());
  return t;
}

Traced run_traced(device_model::Device& dev, const device_model::Program& p) {
  return run_traced(dev, std::vector<device_model::Program>{p});
}

bool overlaps(const SliceRecord& a, const SliceRecord& b) {
  return a.begin < b.end && b.begin < a.end;
}

// Loads n tiles from HBM and runs a VectorE pass over each. Pipelined: two SBUF buffers, the load
// of tile i only waits for VectorE to be done with the buffer's previous tile. Serialized: each
// load waits for VectorE to finish the tile before it, so nothing overlaps.
device_model::Program load_and_compute(const device_model::CoreParams& core, int n,
                                       bool pipelined) {
  kernels::ProgramBuilder b(pipelined ? "pipelined" : "serialized", core);
  const uint32_t cols = 4096;  // bf16: 8 KiB per partition
  const auto q = kernels::dma_queue(0);
  std::vector<kernels::ProgramBuilder::Token> vector_done;
  for (int i = 0; i < n; ++i) {
    const uint64_t buf = (i % 2) * cols * 2;
    const int reuse = pipelined ? i - 2 : i - 1;
    if (reuse >= 0) b.wait(q, vector_done[reuse]);
    b.emit(q, isa::dma_copy(
                  isa::sbuf_tile(DType::kBf16, 128, buf, cols),
                  isa::hbm_rows(DType::kBf16, uint64_t(i) * 128 * cols * 2, 128, cols, cols)));
    b.wait(kernels::kVector, b.mark(q));
    b.emit(kernels::kVector,
           isa::tensor_scalar(
               isa::sbuf_tile(DType::kFp32, 128, (64 << 10) + (i % 2) * cols * 4, cols),
               isa::sbuf_tile(DType::kBf16, 128, buf, cols), AluOp::kMultiply, isa::imm(0.5f)));
    vector_done.push_back(b.mark(kernels::kVector));
  }
  return std::move(b).build();
}

TEST(Concurrency, DmaOverlappingComputeShortensTotalTime) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const int n = 8;
  const Traced serial = run_traced(*dev, load_and_compute(dev->params().core, n, false));
  const Traced piped = run_traced(*dev, load_and_compute(dev->params().core, n, true));
  const double serial_ns = serial.result.duration().ns();
  const double piped_ns = piped.result.duration().ns();
  // Serialized: the run is at least the sum of every transfer and every compute instruction.
  EXPECT_GE(serial_ns, serial.busy_ns("DMA q0") + serial.busy_ns("VectorE"));
  for (const auto& d : serial.row("DMA q0")) {
    for (const auto& v : serial.row("VectorE")) EXPECT_FALSE(overlaps(d, v));
  }
  // Pipelined: loads run under compute, and the same work takes much less time.
  int overlapping = 0;
  for (const auto& d : piped.row("DMA q0")) {
    for (const auto& v : piped.row("VectorE")) overlapping += overlaps(d, v);
  }
  EXPECT_GE(overlapping, n - 2);
  EXPECT_LT(piped_ns, 0.7 * serial_ns);
  EXPECT_LT(piped_ns, piped.busy_ns("DMA q0") + piped.busy_ns("VectorE"));
  EXPECT_NEAR(piped.busy_ns("VectorE"), serial.busy_ns("VectorE"), 1e-3);
}

// HARDWARE.md 1.6: dependencies between engines go through semaphores. A consumer waiting on the
// producer's semaphore starts exactly when the producer's result is visible: its end plus the
// producer's pipeline latency (a DMA transfer's data is visible when it ends).
TEST(Concurrency, SemaphoreDependencySerialisesConsumerAfterProducerResult) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  const auto x = isa::sbuf_tile(DType::kFp32, 128, 0, 1024);
  const auto y = isa::sbuf_tile(DType::kFp32, 128, 8192, 1024);
  const auto z = isa::sbuf_tile(DType::kFp32, 128, 16384, 1024);
  auto program = [&](bool with_waits) {
    kernels::ProgramBuilder b("producer_consumer", core);
    const auto q = kernels::dma_queue(0);
    b.emit(q, isa::dma_copy(x, isa::hbm_rows(DType::kFp32, 0, 128, 1024, 1024)));
    const auto loaded = b.mark(q);
    if (with_waits) b.wait(kernels::kVector, loaded);
    b.emit(kernels::kVector, isa::tensor_scalar(y, x, AluOp::kAdd, isa::imm(1)));
    const auto added = b.mark(kernels::kVector);
    if (with_waits) b.wait(kernels::kScalar, added);
    b.emit(kernels::kScalar, isa::activation(z, y, ActFunc::kExp));
    return std::move(b).build();
  };
  const Traced t = run_traced(*dev, program(true));
  const auto dma = t.row("DMA q0"), vec = t.row("VectorE"), act = t.row("ScalarE");
  ASSERT_EQ(dma.size(), 1u);
  ASSERT_EQ(vec.size(), 1u);
  ASSERT_EQ(act.size(), 1u);
  EXPECT_EQ(vec[0].begin, dma[0].end);
  const sim::SimTime vector_latency =
      sim::SimTime::from_ns(core.vector.pipeline_latency_cycles / core.vector.frequency_hz * 1e9);
  EXPECT_NEAR(static_cast<double>(act[0].begin.ps),
              static_cast<double>((vec[0].end + vector_latency).ps), 1.0);
  // Without the semaphores nothing orders them: all three start with the kernel.
  const Traced free_run = run_traced(*dev, program(false));
  const sim::SimTime start = free_run.result.start;
  EXPECT_EQ(free_run.row("VectorE").at(0).begin, start);
  EXPECT_EQ(free_run.row("ScalarE").at(0).begin, start);
  EXPECT_LT(free_run.result.duration(), t.result.duration());
}

// HARDWARE.md 1.8/1.9: queues share their core's DMA engines and the HBM stack. On trn1 one
// queue is limited by the stack (410 GB/s < 16 x 27.2 GB/s); two concurrent queues split it.
// Rates are of the data phase (slice minus the per-packet processing the slice also holds).
double data_phase_bytes_per_s(const SliceRecord& s, double packet_overhead_ns) {
  const double engines = s.args.at("engines").get<double>();
  const double packets = s.args.at("packets").get<double>();
  const double ns = (s.end - s.begin).ns() - std::ceil(packets / engines) * packet_overhead_ns;
  return s.args.at("bytes").get<double>() / (ns * 1e-9);
}

TEST(Concurrency, TwoDmaQueuesSharingOneHbmStackEachGetHalfItsBandwidth) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& p = dev->params();
  const double stack = p.hbm.bandwidth_bytes_per_s;
  ASSERT_LT(stack, p.core.dma.engines * p.core.dma.engine_bandwidth_bytes_per_s);
  const uint32_t cols = 8192;  // 16 KiB per partition, 2 MiB per transfer
  auto copy = [&](uint64_t hbm, uint64_t sbuf) {
    return isa::dma_copy(isa::sbuf_tile(DType::kBf16, 128, sbuf, cols),
                         isa::hbm_rows(DType::kBf16, hbm, 128, cols, cols));
  };
  kernels::ProgramBuilder solo("one_queue", p.core);
  solo.emit(kernels::dma_queue(0), copy(0, 0));
  const Traced one = run_traced(*dev, std::move(solo).build());
  kernels::ProgramBuilder pair("two_queues", p.core);
  pair.emit(kernels::dma_queue(0), copy(0, 0));
  pair.emit(kernels::dma_queue(1), copy(4 << 20, 32 << 10));
  const Traced two = run_traced(*dev, std::move(pair).build());

  const double overhead = p.core.dma.descriptor_overhead_ns;
  const double alone = data_phase_bytes_per_s(one.row("DMA q0").at(0), overhead);
  EXPECT_NEAR(alone, stack, 0.05 * stack);
  for (const char* q : {"DMA q0", "DMA q1"}) {
    SCOPED_TRACE(q);
    const auto s = two.row(q).at(0);
    EXPECT_NEAR(data_phase_bytes_per_s(s, overhead), stack / 2, 0.05 * stack / 2);
    EXPECT_TRUE(overlaps(s, two.row(q == std::string("DMA q0") ? "DMA q1" : "DMA q0").at(0)));
  }
}

// HARDWARE.md 1.6: each engine runs its own stream; without semaphores TensorE, VectorE and
// ScalarE work at the same time and the run takes as long as the busiest, not the sum. (On NC-v2
// SBUF serves TensorE, VectorE and ScalarE at full bandwidth together, ARCH-v2 1.7.)
TEST(Concurrency, IndependentEnginesRunConcurrently) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  kernels::ProgramBuilder b("independent", dev->params().core);
  for (int i = 0; i < 16; ++i) {
    b.emit(kernels::kTensor, isa::matmul(isa::psum_tile(DType::kFp32, 128, 0, 512),
                                         isa::sbuf_tile(DType::kBf16, 128, 0, 128),
                                         isa::sbuf_tile(DType::kBf16, 128, 1024, 512), false));
  }
  for (int i = 0; i < 4; ++i) {
    b.emit(kernels::kVector, isa::tensor_scalar(isa::sbuf_tile(DType::kFp32, 128, 16 << 10, 1024),
                                                isa::sbuf_tile(DType::kFp32, 128, 8 << 10, 1024),
                                                AluOp::kAdd, isa::imm(1)));
    b.emit(kernels::kScalar,
           isa::activation(isa::sbuf_tile(DType::kFp32, 128, 32 << 10, 1024),
                           isa::sbuf_tile(DType::kFp32, 128, 8 << 10, 1024), ActFunc::kTanh));
  }
  const Traced t = run_traced(*dev, std::move(b).build());
  const double tensor = t.busy_ns("TensorE"), vector = t.busy_ns("VectorE"),
               scalar = t.busy_ns("ScalarE");
  const double longest = std::max({tensor, vector, scalar});
  ASSERT_GT(std::min({tensor, vector, scalar}), 0.5 * longest);  // comparable amounts of work
  const double total = t.result.duration().ns();
  EXPECT_LT(total, 1.1 * longest);
  EXPECT_LT(total, 0.5 * (tensor + vector + scalar));
  // TensorE's first matmul waits for its stationary; the load starts with the kernel.
  for (const char* e : {"TensorE (LoadStationary)", "VectorE", "ScalarE"}) {
    EXPECT_EQ(t.row(e).at(0).begin, t.result.start) << e;
  }
}

// A stream waiting on a semaphore nobody signals: run() reports every blocked engine with its
// semaphore, unwinds, and the device runs the next program normally.
// A launch resets only the semaphores the previous program changed: a value a program left
// behind must not satisfy the next program's wait, and an untouched semaphore stays at zero.
TEST(Concurrency, SemaphoresAProgramRaisedStartAtZeroInTheNext) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto tile = isa::sbuf_tile(DType::kFp32, 128, 0, 1024);
  device_model::Program raise;
  raise.name = "raise";
  auto& vec = raise.stream(kernels::kVector).instructions;
  vec.push_back(isa::memset(tile, 1.0f));
  vec.push_back(isa::sem_signal(40, 3));
  vec.push_back(isa::sem_signal(7, 1));
  dev->run(0, raise);
  for (const uint16_t sem : {40, 7, 41}) {
    device_model::Program wait;
    wait.name = "wait";
    wait.stream(kernels::kVector).instructions.push_back(isa::sem_wait(sem, 1));
    EXPECT_THROW(dev->run(0, wait), device_model::DeadlockError) << "semaphore " << sem;
  }
  dev->run(0, raise);  // raised again after a deadlock's reset, and waited for in the same run
  device_model::Program both = raise;
  both.stream(kernels::kScalar).instructions.push_back(isa::sem_wait(40, 3));
  EXPECT_NO_THROW(dev->run(0, both));
}

TEST(Concurrency, UnsignalledSemaphoreThrowsDeadlockErrorAndDeviceRecovers) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto& core = dev->params().core;
  const auto tile = isa::sbuf_tile(DType::kFp32, 128, 0, 1024);
  const auto out = isa::sbuf_tile(DType::kFp32, 128, 8192, 1024);
  device_model::Program stuck;
  stuck.name = "stuck";
  auto& vec = stuck.stream(kernels::kVector).instructions;
  vec.push_back(isa::memset(tile, 1.0f));
  vec.push_back(isa::sem_wait(40, 1));
  vec.push_back(isa::tensor_copy(out, tile));
  stuck.stream(kernels::dma_queue(3)).instructions.push_back(isa::sem_wait(41, 2));
  stuck.stream(kernels::kScalar).instructions.push_back(isa::activation(out, tile, ActFunc::kExp));
  try {
    dev->run(0, stuck);
    FAIL() << "expected DeadlockError";
  } catch (const device_model::DeadlockError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nc0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("VectorE at instruction 1 waits for semaphore 40 >= 1"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("DMA q3 at instruction 0 waits for semaphore 41 >= 2"), std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("ScalarE"), std::string::npos) << "ScalarE finished: " << msg;
  }
  // The next program uses the same semaphores and engines and gets exact timing: a VectorE pass
  // (1024 cycles + 200 cycles latency) then a ScalarE one ordered by a semaphore.
  kernels::ProgramBuilder b("after_deadlock", core);
  b.emit(kernels::kVector, isa::tensor_scalar(out, tile, AluOp::kAdd, isa::imm(1)));
  b.wait(kernels::kScalar, b.mark(kernels::kVector));
  b.emit(kernels::kScalar, isa::activation(tile, out, ActFunc::kExp));
  const auto r = dev->run(0, std::move(b).build());
  const double vector_ns =
      (1024.0 + core.vector.pipeline_latency_cycles) / core.vector.frequency_hz * 1e9;
  const double scalar_ns =
      (1024.0 + core.scalar.pipeline_latency_cycles) / core.scalar.frequency_hz * 1e9;
  EXPECT_NEAR(r.duration().ns(), vector_ns + scalar_ns, 0.01);
  ASSERT_EQ(r.cores.size(), 1u);
  EXPECT_EQ(r.cores[0].instructions, 4u);  // two data instructions, a signal and a wait
}

// trn2 (HARDWARE.md 1.9, LNC page): "Each bank is shared by two physical NeuronCore-v3". One core's
// 16 DMA engines (435 GB/s) stay below its stack (725 GB/s), but two cores on one stack share it
// and slow each other down; two cores on different stacks do not.
device_model::Program big_copy(const device_model::CoreParams& core, uint64_t hbm_base) {
  kernels::ProgramBuilder b("copy", core);
  const uint32_t cols = 8192;
  for (int i = 0; i < 16; ++i) {
    b.emit(kernels::dma_queue(static_cast<uint8_t>(i % 4)),
           isa::dma_copy(isa::sbuf_tile(DType::kBf16, 128, (i % 4) * cols * 2, cols),
                         isa::hbm_rows(DType::kBf16, hbm_base + uint64_t(i) * 128 * cols * 2, 128,
                                       cols, cols)));
  }
  return std::move(b).build();
}

TEST(Concurrency, TwoTrn2CoresSharingAnHbmStackContend) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 4);
  const auto& p = dev->params();
  ASSERT_EQ(dev->hbm_base_of_core(0), dev->hbm_base_of_core(1));
  ASSERT_NE(dev->hbm_base_of_core(0), dev->hbm_base_of_core(2));
  const double bytes = 16.0 * 128 * 8192 * 2;
  auto copy_for = [&](uint32_t c) {
    return big_copy(p.core, dev->hbm_base_of_core(c) + (c % 2) * (1ull << 30));
  };
  auto ns_of = [](const device_model::RunResult& r, uint32_t c) {
    for (const auto& cr : r.cores) {
      if (cr.core == c) return (cr.end - cr.start).ns();
    }
    return -1.0;
  };
  const Traced solo = run_traced(*dev, {copy_for(0)}, {0});
  const Traced shared = run_traced(*dev, {copy_for(0), copy_for(1)}, {0, 1});
  const Traced apart = run_traced(*dev, {copy_for(0), copy_for(2)}, {0, 2});
  const double t_solo = ns_of(solo.result, 0);
  ASSERT_GT(t_solo, 0);
  // Alone, a core is limited by its own DMA engines, not the stack.
  EXPECT_LT(bytes / t_solo * 1e9, 0.75 * p.hbm.bandwidth_bytes_per_s);
  for (uint32_t c : {0u, 1u}) {
    SCOPED_TRACE("core " + std::to_string(c));
    EXPECT_GT(ns_of(shared.result, c), 1.1 * t_solo);
  }
  // Together they move data at the stack's bandwidth.
  const double both_ns = std::max(ns_of(shared.result, 0), ns_of(shared.result, 1));
  EXPECT_NEAR(2 * bytes / both_ns * 1e9, p.hbm.bandwidth_bytes_per_s,
              0.05 * p.hbm.bandwidth_bytes_per_s);
  for (uint32_t c : {0u, 2u}) {
    SCOPED_TRACE("core " + std::to_string(c));
    EXPECT_NEAR(ns_of(apart.result, c), t_solo, 0.01 * t_solo);
  }
}

}  // namespace
}  // namespace neuronsim
