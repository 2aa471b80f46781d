// Simulated time and traces depend only on the configuration and the program: not on the process,
// not on what ran before in the same process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/dense_layer_norm.h"
#include "neuronsim/reference/host_checks.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::DType;

using Results = std::array<uint64_t, 4>;

// Each configuration needs its own process (SystemC elaborates once); runs `fn` in a fork and
// returns what it wrote, or all ones if the child failed.
Results in_child(const std::function<Results()>& fn) {
  Results v;
  v.fill(~0ull);
  int fds[2];
  if (pipe(fds) != 0) return v;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Results r;
    r.fill(~0ull);
    try {
      r = fn();
    } catch (...) {
    }
    const bool ok = write(fds[1], &r, sizeof r) == sizeof r;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  if (read(fds[0], &v, sizeof v) != sizeof v) v.fill(~0ull);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "neuronsim_determinism_" + std::to_string(getpid()) + "_" + name;
}

kernels::GemmSpec gemm_spec() {
  kernels::GemmSpec s;
  s.m = 200, s.k = 300, s.n = 700;  // partial tiles on every axis
  s.bias = true;
  s.epilogue = device_model::ActFunc::kGelu;
  return s;
}

constexpr kernels::GemmAddresses kGemm{0, 1 << 20, 2 << 20, 3 << 20};

// A GEMM (TensorE, VectorE, ScalarE, DMA) then a layer norm, with data, on one trn1 core.
Results run_trn1(const std::string& trace_path) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kFull);
  traces::ChromeJsonSink sink(trace_path);
  dev->set_trace_sink(&sink);
  const auto spec = gemm_spec();
  reference::fill_normal(dev->hbm_data() + kGemm.a_t, spec.in_dtype, uint64_t{spec.k} * spec.m, 1);
  reference::fill_normal(dev->hbm_data() + kGemm.b, spec.in_dtype, uint64_t{spec.k} * spec.n, 2);
  reference::fill_normal(dev->hbm_data() + kGemm.bias, spec.in_dtype, spec.n, 3);
  const auto g = dev->run(0, kernels::build_gemm(spec, kGemm, dev->params().core));
  kernels::LayerNormSpec ln{300, 96, DType::kBf16, 1e-5f};
  kernels::LayerNormAddresses la{8 << 20, 9 << 20, 10 << 20, 11 << 20};
  const auto l = dev->run(0, kernels::build_layernorm(ln, la, dev->params().core));
  dev->set_trace_sink(nullptr);
  sink.finish();
  return {g.duration().ps, l.duration().ps, dev->now().ps, 0};
}

// Two trn2 cores on one HBM stack running GEMMs at once: their DMA shares bandwidth.
Results run_trn2_contending(const std::string& trace_path) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 2);
  traces::ChromeJsonSink sink(trace_path);
  dev->set_trace_sink(&sink);
  kernels::GemmSpec s = gemm_spec();
  s.m = 512, s.k = 512, s.n = 1024;
  const uint64_t second = 256ull << 20;
  dev->submit(0, kernels::build_gemm(s, kGemm, dev->params().core));
  dev->submit(1, kernels::build_gemm(
                     s, {second, second + (1 << 20), second + (2 << 20), second + (3 << 20)},
                     dev->params().core));
  const auto r = dev->run();
  dev->set_trace_sink(nullptr);
  sink.finish();
  return {r.duration().ps, (r.cores.at(0).end - r.cores.at(0).start).ps,
          (r.cores.at(1).end - r.cores.at(1).start).ps, 0};
}

void expect_identical_in_two_processes(const std::function<Results(const std::string&)>& run,
                                       const std::string& name) {
  const std::string a = temp_path(name + "_a.json"), b = temp_path(name + "_b.json");
  const Results ra = in_child([&] { return run(a); });
  const Results rb = in_child([&] { return run(b); });
  ASSERT_NE(ra[0], ~0ull) << "child run failed";
  EXPECT_GT(ra[0], 0u);
  EXPECT_EQ(ra, rb);
  const std::string fa = read_file(a), fb = read_file(b);
  ASSERT_GT(fa.size(), 1000u);
  EXPECT_NE(fa.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_TRUE(fa == fb) << "trace files differ: " << a << " vs " << b;
  if (fa == fb) {
    std::remove(a.c_str());
    std::remove(b.c_str());
  }
}

TEST(Determinism, SameProgramInTwoProcessesGivesIdenticalTimesAndTraceFiles) {
  expect_identical_in_two_processes(run_trn1, "trn1");
}

TEST(Determinism, ContendingCoresInTwoProcessesGiveIdenticalTimesAndTraceFiles) {
  expect_identical_in_two_processes(run_trn2_contending, "trn2");
}

// Runs `p` with an in-memory trace; returns the slices with times relative to the run start.
struct RelativeSlice {
  std::string track, name;
  uint64_t begin, end;
  bool operator==(const RelativeSlice&) const = default;
};

std::vector<RelativeSlice> run_relative(device_model::Device& dev, const device_model::Program& p,
                                        device_model::RunResult* result) {
  traces::MemoryTraceSink sink;
  dev.set_trace_sink(&sink);
  *result = dev.run(0, p);
  dev.set_trace_sink(nullptr);
  std::vector<RelativeSlice> out;
  for (const auto& s : sink.trace().slices) {
    const auto& t = sink.trace().tracks.at(s.track);
    out.push_back({t.process + "/" + t.name, s.name, (s.begin - result->start).ps,
                   (s.end - result->start).ps});
  }
  return out;
}

// The same program later in the same process (after itself and after another program) takes the
// same time and produces the same trace, shifted: no engine state leaks between runs.
TEST(Determinism, SameProgramTwiceInOneProcessGivesEqualDurationsAndTraces) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const auto gemm = kernels::build_gemm(gemm_spec(), kGemm, dev->params().core);
  kernels::LayerNormSpec ln{256, 512, DType::kFp32, 1e-5f};
  const auto other =
      kernels::build_layernorm(ln, {8 << 20, 9 << 20, 10 << 20, 11 << 20}, dev->params().core);
  device_model::RunResult r1, r2, r3, mid;
  const auto t1 = run_relative(*dev, gemm, &r1);
  const auto t2 = run_relative(*dev, gemm, &r2);
  run_relative(*dev, other, &mid);
  const auto t3 = run_relative(*dev, gemm, &r3);
  EXPECT_GT(r1.duration().ps, 0u);
  EXPECT_EQ(r2.start, r1.end);
  EXPECT_EQ(r1.duration(), r2.duration());
  EXPECT_EQ(r1.duration(), r3.duration());
  ASSERT_GT(t1.size(), 10u);
  EXPECT_TRUE(t1 == t2);
  EXPECT_TRUE(t1 == t3);
}

// Timing-only runs without a trace let the compute engines defer their per-instruction waits
// (StreamEngine::wait_until): every time and every statistic must equal those of the traced run,
// which waits per instruction.
struct TimedRun {
  std::vector<uint64_t> core_ps;  // per core: end - start
  uint64_t duration_ps = 0;
  std::string stats;
};

TimedRun run_timed(device_model::Device& dev, const std::vector<device_model::Program>& per_core,
                   bool traced) {
  traces::MemoryTraceSink sink;
  if (traced) dev.set_trace_sink(&sink);
  dev.stats().reset();
  for (uint32_t c = 0; c < per_core.size(); ++c) dev.submit(c, per_core[c]);
  const device_model::RunResult r = dev.run();
  dev.set_trace_sink(nullptr);
  TimedRun t;
  for (const auto& c : r.cores) t.core_ps.push_back((c.end - c.start).ps);
  t.duration_ps = r.duration().ps;
  t.stats = dev.stats().to_json().dump();
  if (traced) EXPECT_GT(sink.trace().slices.size(), 10u);
  return t;
}

void expect_untraced_equals_traced(device_model::Device& dev,
                                   const std::vector<device_model::Program>& per_core) {
  const TimedRun plain = run_timed(dev, per_core, false);
  const TimedRun traced = run_timed(dev, per_core, true);
  const TimedRun again = run_timed(dev, per_core, false);
  ASSERT_EQ(plain.core_ps.size(), per_core.size());
  EXPECT_GT(plain.duration_ps, 0u);
  EXPECT_EQ(plain.core_ps, traced.core_ps);
  EXPECT_EQ(plain.duration_ps, traced.duration_ps);
  EXPECT_EQ(plain.stats, traced.stats);
  EXPECT_EQ(plain.core_ps, again.core_ps);
  EXPECT_EQ(plain.stats, again.stats);
  // The statistics include the per-engine semaphore stall time, to the picosecond.
  EXPECT_NE(plain.stats.find("semaphore_wait_ps"), std::string::npos);
}

TEST(Determinism, UntracedTimingRunMatchesTracedRunToThePicosecond) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  kernels::GemmSpec s = gemm_spec();
  s.m = 512, s.k = 1024, s.n = 1536;  // several blocks: TensorE runs long between semaphores
  expect_untraced_equals_traced(*dev, {kernels::build_gemm(s, kGemm, dev->params().core)});
  kernels::LayerNormSpec ln{300, 96, DType::kBf16, 1e-5f};
  expect_untraced_equals_traced(
      *dev,
      {kernels::build_layernorm(ln, {8 << 20, 9 << 20, 10 << 20, 11 << 20}, dev->params().core)});
}

TEST(Determinism, UntracedContendingCoresMatchTracedRunToThePicosecond) {
  auto dev = testing::make_device("trn2", {}, device_model::ExecMode::kTiming, 2);
  kernels::GemmSpec s = gemm_spec();
  s.m = 512, s.k = 512, s.n = 1024;
  const uint64_t second = 256ull << 20;
  expect_untraced_equals_traced(
      *dev,
      {kernels::build_gemm(s, kGemm, dev->params().core),
       kernels::build_gemm(s, {second, second + (1 << 20), second + (2 << 20), second + (3 << 20)},
                           dev->params().core)});
}

}  // namespace
}  // namespace neuronsim
