// Where the time went (traces/time_account.h): the window split into parts that add up to it,
// from intervals in any order, settled incrementally or at once; the trace summary's account and
// limit; the runtime's account of launches against the trace it records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/runtime/runtime.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/traces/summary.h"
#include "neuronsim/traces/time_account.h"
#include "neuronsim/traces/trace_reader.h"

namespace neuronsim {
namespace {

using sim::SimTime;
using traces::TimeAccumulator;
using traces::TimePart;

SimTime ns(double v) {
  return SimTime::from_ns(v);
}

uint64_t sum_of_parts(const traces::TimeAccount& a) {
  uint64_t n = 0;
  for (const SimTime& t : a.exposed) n += t.ps;
  return n;
}

TEST(TimeAccount, EachInstantBelongsToTheFirstActivePartAndThePartsAddUp) {
  TimeAccumulator acc;
  acc.add(TimePart::kLaunch, ns(0), ns(10));    // exposed: nothing runs
  acc.add(TimePart::kKernels, ns(10), ns(30));  // the kernel
  acc.add(TimePart::kLaunch, ns(12), ns(22));   // hidden under the kernel
  acc.add(TimePart::kLaunch, ns(22), ns(40));   // 10 ns exposed after it
  acc.add(TimePart::kCpuFallback, ns(50), ns(60));
  acc.add(TimePart::kHostCopies, ns(55), ns(70));  // a copy outranks the fallback
  const traces::TimeAccount a = acc.account(ns(100));
  EXPECT_EQ(a.window(), ns(100));
  EXPECT_EQ(a.of(TimePart::kKernels), ns(20));
  EXPECT_EQ(a.of(TimePart::kLaunch), ns(20));
  EXPECT_EQ(a.total[static_cast<size_t>(TimePart::kLaunch)], ns(38));
  EXPECT_EQ(a.count[static_cast<size_t>(TimePart::kLaunch)], 3u);
  EXPECT_EQ(a.of(TimePart::kHostCopies), ns(15));
  EXPECT_EQ(a.of(TimePart::kCpuFallback), ns(5));
  EXPECT_EQ(a.of(TimePart::kIdle), ns(40));  // 40..50 and 70..100
  EXPECT_EQ(sum_of_parts(a), a.window().ps);
}

TEST(TimeAccount, SettlingAsItGoesGivesTheAccountOfAllAtOnce) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> part(0, 5), len(1, 500), gap(0, 300);
  TimeAccumulator incremental, at_once;
  uint64_t host = 0;
  for (int i = 0; i < 5000; ++i) {
    // As the runtime records: nothing begins before the host clock, work runs ahead of it.
    const uint64_t b = host + static_cast<uint64_t>(gap(rng));
    const uint64_t e = b + static_cast<uint64_t>(len(rng));
    const auto p = static_cast<TimePart>(part(rng));
    incremental.add(p, {b}, {e});
    at_once.add(p, {b}, {e});
    host += static_cast<uint64_t>(gap(rng)) / 2;
    if (incremental.pending() > 64) incremental.settle({host});
  }
  EXPECT_LT(incremental.pending(), 200u);
  const traces::TimeAccount a = incremental.account({host + 10000});
  const traces::TimeAccount b = at_once.account({host + 10000});
  EXPECT_EQ(a.exposed, b.exposed);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(sum_of_parts(a), a.window().ps);
}

TEST(TimeAccount, IntervalsOutsideTheWindowAreCut) {
  TimeAccumulator acc(ns(100));
  acc.add(TimePart::kKernels, ns(50), ns(150));  // half before the window
  acc.add(TimePart::kLaunch, ns(180), ns(250));  // past its end
  const traces::TimeAccount a = acc.account(ns(200));
  EXPECT_EQ(a.window(), ns(100));
  EXPECT_EQ(a.of(TimePart::kKernels), ns(50));
  EXPECT_EQ(a.of(TimePart::kLaunch), ns(20));
  EXPECT_EQ(a.of(TimePart::kIdle), ns(30));
}

// A trace as the runtime and device record it: kernels on nc0's Kernels row, instructions on
// engine rows, launches and a CPU fallback on the host row, a host copy on Host DMA.
traces::Trace launch_bound_trace() {
  traces::Trace t;
  t.tracks = {{"nc0", "Kernels", sim::TrackKind::kSlices, 0},
              {"nc0", "VectorE", sim::TrackKind::kSlices, 12},
              {"nc0", "DMA q0", sim::TrackKind::kSlices, 18},
              {"host", "Host runtime", sim::TrackKind::kSlices, 2},
              {"nc0", "Host DMA", sim::TrackKind::kSlices, 90}};
  auto add = [&](uint32_t track, const char* name, const char* category, double b, double e) {
    t.slices.push_back({track, name, category, ns(b), ns(e), nlohmann::json::object()});
  };
  for (int i = 0; i < 4; ++i) {  // launch 10 us, kernel 5 us (VectorE 3 us, DMA 4 us)
    const double h = 15000.0 * i;
    add(3, "launch k", "launch", h, h + 10000);
    add(0, "k", "kernel", h + 10000, h + 15000);
    add(1, "tensor_tensor", "vector", h + 11000, h + 14000);
    add(2, "dma_copy", "dma0", h + 10000, h + 14000);
  }
  add(3, "CPU fallback aten::x", "fallback", 60000, 62000);
  add(4, "device_to_host", "host_dma", 62000, 63000);
  t.metadata = {{"preset", "trn1"}, {"begin_ns", 0.0}, {"end_ns", 64000.0}};
  return t;
}

TEST(TimeAccount, SummaryAccountsForTheWindowAndNamesLaunchOverheadAsTheLimit) {
  const traces::Summary s = traces::summarize(launch_bound_trace(), 64);
  EXPECT_EQ(s.begin, ns(0));
  EXPECT_EQ(s.end, ns(64000));  // the recording's end, past the last slice
  EXPECT_EQ(s.time.of(TimePart::kKernels), ns(20000));
  EXPECT_EQ(s.time.of(TimePart::kLaunch), ns(40000));
  EXPECT_EQ(s.time.of(TimePart::kCpuFallback), ns(2000));
  EXPECT_EQ(s.time.of(TimePart::kHostCopies), ns(1000));
  EXPECT_EQ(s.time.of(TimePart::kIdle), ns(1000));
  EXPECT_EQ(sum_of_parts(s.time), s.time.window().ps);
  EXPECT_EQ(s.engines_busy, ns(16000));  // DMA 10..14 and VectorE 11..14, four times
  EXPECT_EQ(s.limit.name, "kernel launch overhead");
  EXPECT_FALSE(s.limit.engine);
  EXPECT_DOUBLE_EQ(s.limit.share, 40000.0 / 64000);
  EXPECT_EQ(s.bottleneck, "nc0 DMA (all queues)");  // the busiest engine is still reported
  // The timeline: one row per engine and per part other than kernels, 64 bins of 1 us.
  ASSERT_EQ(s.timeline.bin, ns(1000));
  const traces::Timeline::Row* launch = nullptr;
  const traces::Timeline::Row* dma = nullptr;
  for (const auto& r : s.timeline.rows) {
    if (r.label == "kernel launch overhead") launch = &r;
    if (r.label == "DMA (all queues)") dma = &r;
  }
  ASSERT_NE(launch, nullptr);
  ASSERT_NE(dma, nullptr);
  EXPECT_DOUBLE_EQ(launch->busy[0], 1.0);
  EXPECT_DOUBLE_EQ(launch->busy[10], 0.0);
  EXPECT_DOUBLE_EQ(dma->busy[10], 1.0);
  EXPECT_DOUBLE_EQ(dma->busy[14], 0.0);
  // Per kernel, each engine's busy time inside it.
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].engine_busy.at("VectorE"), ns(12000));
  EXPECT_EQ(s.kernels[0].engine_busy.at("DMA"), ns(16000));
}

TEST(TimeAccount, RuntimeAccountMatchesTheAccountOfTheTraceItRecords) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  const std::string path = ::testing::TempDir() + "time_account_" + std::to_string(getpid());
  runtime::TraceSession::start(rt, path);
  // Four DMA queues each load a 128 x 512 fp32 tile: a kernel of a few microseconds.
  device_model::Program p;
  p.name = "load";
  const uint64_t buf = rt.hbm_address(rt.malloc(0, 1 << 20));
  for (uint8_t q = 0; q < 4; ++q) {
    device_model::Stream st;
    st.id = {device_model::EngineKind::kDma, q};
    st.instructions.push_back(device_model::isa::dma_copy(
        device_model::isa::sbuf_tile(device_model::DType::kFp32, 128, q * 2048u, 512),
        device_model::isa::hbm_rows(device_model::DType::kFp32, buf + (uint64_t{q} << 18), 128, 512,
                                    512)));
    p.streams.push_back(std::move(st));
  }
  for (int i = 0; i < 5; ++i) {
    const SimTime h0 = rt.charge_launch_overhead();
    const device_model::RunResult r = rt.launch(0, 0, p, false);
    runtime::TraceSession::active()->host("launch copy", "launch", h0, rt.host_time());
    for (const auto& c : r.cores) runtime::TraceSession::active()->kernel(c.core, c.start, c.end);
  }
  const SimTime h0 = rt.charge_cpu_fallback();
  runtime::TraceSession::active()->host("CPU fallback x", "fallback", h0, rt.host_time());
  rt.synchronize();
  const traces::TimeAccount live = rt.time_account();
  runtime::TraceSession::stop(rt, nlohmann::json::object());
  const traces::Summary s = traces::summarize(traces::read_trace_file(path));
  std::remove(path.c_str());

  EXPECT_EQ(sum_of_parts(live), live.window().ps);
  EXPECT_EQ(live.count[static_cast<size_t>(TimePart::kKernels)], 5u);
  EXPECT_GT(live.of(TimePart::kLaunch).ps, 0u);
  EXPECT_GT(live.of(TimePart::kKernels).ps, 0u);
  for (size_t i = 0; i < traces::kTimePartCount; ++i) {
    // The trace stores times in microseconds with picosecond digits.
    EXPECT_NEAR(static_cast<double>(s.time.exposed[i].ps), static_cast<double>(live.exposed[i].ps),
                2.0)
        << traces::time_part_name(static_cast<TimePart>(i));
  }
}

}  // namespace
}  // namespace neuronsim
