// Traces: the Chrome JSON file, reading it back, summaries and their text, and the structure of a
// real run's trace (HARDWARE.md 4.2: one row per engine and per DMA queue).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/traces/trace_reader.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using nlohmann::json;
using sim::SimTime;
using sim::TrackInfo;
using sim::TrackKind;
using traces::SliceRecord;
using traces::Trace;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "neuronsim_trace_test_" + std::to_string(getpid()) + "_" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

device_model::Program small_gemm(const device_model::CoreParams& core) {
  kernels::GemmSpec s;
  s.m = 256, s.k = 256, s.n = 1024;
  s.bias = true;
  s.epilogue = device_model::ActFunc::kGelu;
  return kernels::build_gemm(s, {0, 1 << 20, 2 << 20, 3 << 20}, core);
}

// ---- ChromeJsonSink ----

TEST(Trace, ChromeJsonSinkWritesValidJsonWithMetadataSlicesAndCounters) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const std::string path = temp_path("run.json");
  {
    traces::ChromeJsonSink sink(path);
    dev->set_trace_sink(&sink);
    dev->run(0, small_gemm(dev->params().core));
    dev->set_trace_sink(nullptr);
  }                                               // the destructor closes the document
  const json doc = json::parse(read_file(path));  // throws if not valid JSON
  std::remove(path.c_str());
  ASSERT_TRUE(doc.at("traceEvents").is_array());
  EXPECT_EQ(doc.at("displayTimeUnit"), "ns");

  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  int slices = 0, counters = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name") processes[e.at("pid")] = e.at("args").at("name");
    if (e.at("name") == "thread_name")
      threads[{e.at("pid"), e.at("tid")}] = e.at("args").at("name");
  }
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++slices;
      for (const char* k : {"ts", "dur"}) EXPECT_TRUE(e.at(k).is_number()) << e;
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_TRUE(e.at("name").is_string());
      EXPECT_TRUE(e.at("cat").is_string());
      EXPECT_TRUE(e.at("args").is_object());
      EXPECT_TRUE(threads.count({e.at("pid"), e.at("tid")})) << "slice on an unnamed thread " << e;
    } else if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e.at("ts").is_number());
      EXPECT_TRUE(e.at("args").at("value").is_number());
      EXPECT_TRUE(processes.count(e.at("pid"))) << e;
    } else {
      EXPECT_EQ(ph, "M") << e;
    }
  }
  EXPECT_GT(slices, 20);
  EXPECT_GT(counters, 2);
  std::set<std::string> process_names, thread_names;
  for (const auto& [pid, n] : processes) process_names.insert(n);
  for (const auto& [key, n] : threads) thread_names.insert(n);
  EXPECT_TRUE(process_names.count("nc0"));
  EXPECT_TRUE(process_names.count("HBM"));
  for (const char* row : {"TensorE", "VectorE", "ScalarE", "DMA q0", "Kernels"}) {
    EXPECT_TRUE(thread_names.count(row)) << row;
  }
  const json& meta = doc.at("otherData");
  EXPECT_EQ(meta.at("preset"), "trn1");
  EXPECT_EQ(meta.at("mode"), "timing");
  EXPECT_DOUBLE_EQ(meta.at("config").at("tensor.frequency_ghz").get<double>(), 2.8);
  EXPECT_NEAR(meta.at("peaks").at("tensor_flops_per_core").get<double>(), 91.75e12, 0.01e12);
}

// Records with awkward values, written through ChromeJsonSink and read back.
struct Synthetic {
  std::vector<TrackInfo> tracks = {{"nc0", "TensorE", TrackKind::kSlices, 10},
                                   {"nc0", "SBUF occupancy (bytes)", TrackKind::kCounter, 100},
                                   {"nc1", "DMA q3", TrackKind::kSlices, 17},
                                   {"HBM", "HBM stack 0 bandwidth (GB/s)", TrackKind::kCounter, 0}};
  std::vector<SliceRecord> slices = {
      {0, "matmul", "tensor", {0}, {1}, {{"cycles", 512}, {"flops", 1.5e7}}},
      {0, "odd \"name\" \\ é", "tensor", {999999}, {1000001}, json::object()},
      {2,
       "dma_copy",
       "dma3",
       {123456789012345},
       {123456789012352},
       {{"bytes", 4096}, {"nested", {{"a", json::array({1, 2, 3})}}}}},
      {2, "dma_copy", "dma3", {123456789012352}, {200000000000000}, {{"src", "hbm"}}}};
  std::vector<traces::CounterRecord> counters = {
      {1, {0}, 0}, {1, {7}, 1.5}, {3, {1000000}, 1e12}, {3, {1000001}, -3.25}};
  json metadata = {{"preset", "trn1"},
                   {"cores", 2},
                   {"list", {1, 2.5, "x"}},
                   {"peaks", {{"tensor_flops_per_core", 9.175e13}}}};

  void write(sim::TraceSink& sink) const {
    for (const auto& t : tracks) sink.add_track(t);
    for (const auto& s : slices) sink.slice(s.track, s.name, s.category, s.begin, s.end, s.args);
    for (const auto& c : counters) sink.counter(c.track, c.t, c.value);
    for (const auto& [k, v] : metadata.items()) sink.metadata(k, v);
  }
};

// Finds the read-back track with the same process and name.
const TrackInfo& track_named(const Trace& t, const TrackInfo& like) {
  for (const auto& tr : t.tracks) {
    if (tr.process == like.process && tr.name == like.name) return tr;
  }
  throw std::runtime_error("no track " + like.process + "/" + like.name);
}

TEST(Trace, ReadTraceFileRoundTripsSlicesCountersAndMetadataExactly) {
  const Synthetic in;
  const std::string path = temp_path("synthetic.json");
  {
    traces::ChromeJsonSink sink(path);
    in.write(sink);
    sink.finish();
    sink.finish();  // idempotent
  }
  const Trace out = traces::read_trace_file(path);
  std::remove(path.c_str());

  ASSERT_EQ(out.slices.size(), in.slices.size());
  for (size_t i = 0; i < in.slices.size(); ++i) {
    SCOPED_TRACE("slice " + std::to_string(i));
    const SliceRecord& a = in.slices[i];
    const SliceRecord& b = out.slices[i];
    const TrackInfo& want = in.tracks[a.track];
    const TrackInfo& got = out.tracks.at(b.track);
    EXPECT_EQ(got.process, want.process);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.kind, TrackKind::kSlices);
    EXPECT_EQ(got.sort_index, want.sort_index);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.category, a.category);
    EXPECT_EQ(b.begin.ps, a.begin.ps);  // picosecond exact
    EXPECT_EQ(b.end.ps, a.end.ps);
    EXPECT_EQ(b.args, a.args);
  }
  ASSERT_EQ(out.counters.size(), in.counters.size());
  for (size_t i = 0; i < in.counters.size(); ++i) {
    SCOPED_TRACE("counter " + std::to_string(i));
    const TrackInfo& got = out.tracks.at(out.counters[i].track);
    EXPECT_EQ(got.name, in.tracks[in.counters[i].track].name);
    EXPECT_EQ(got.process, in.tracks[in.counters[i].track].process);
    EXPECT_EQ(got.kind, TrackKind::kCounter);
    EXPECT_EQ(out.counters[i].t.ps, in.counters[i].t.ps);
    EXPECT_EQ(out.counters[i].value, in.counters[i].value);
  }
  EXPECT_EQ(out.metadata, in.metadata);
  EXPECT_NO_THROW(track_named(out, in.tracks[1]));
}

TEST(Trace, ParseTraceAcceptsABareEventArray) {
  const Trace t = traces::parse_trace(
      R"([{"ph":"M","name":"process_name","pid":3,"tid":0,"args":{"name":"nc2"}},
          {"ph":"M","name":"thread_name","pid":3,"tid":4,"args":{"name":"VectorE"}},
          {"ph":"X","pid":3,"tid":4,"ts":1.000001,"dur":0.5,"name":"memset","cat":"vector"}])",
      "inline");
  ASSERT_EQ(t.slices.size(), 1u);
  EXPECT_EQ(t.tracks.at(t.slices[0].track).process, "nc2");
  EXPECT_EQ(t.tracks.at(t.slices[0].track).name, "VectorE");
  EXPECT_EQ(t.slices[0].begin.ps, 1000001u);
  EXPECT_EQ(t.slices[0].end.ps, 1500001u);
}

// A process forked while a sink records (its writer thread stays in the parent): the child's
// copy drops what it records and its finish() returns, instead of waiting on a writer that is
// not there; the parent's file gets only the parent's records.
TEST(Trace, ChromeJsonSinkInAForkedChildRecordsNothingAndDoesNotHang) {
  const std::string path = temp_path("fork.json");
  {
    traces::ChromeJsonSink sink(path);
    const sim::TrackId t = sink.add_track({"nc0", "row", TrackKind::kSlices, 0});
    sink.slice(t, "parent before", "x", SimTime{0}, SimTime{1000}, json::object());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // More batches than the writer may hold queued: blocks forever without the fork check.
      for (int i = 0; i < 100000; ++i)
        sink.slice(t, "child", "x", SimTime{0}, SimTime{1000}, json::object());
      sink.finish();
      _exit(0);
    }
    int status = 0;
    pid_t done = 0;
    for (int ms = 0; ms < 30000 && done == 0; ms += 20) {
      done = waitpid(child, &status, WNOHANG);
      if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (done == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    EXPECT_NE(done, 0) << "the forked child hung in the sink";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    sink.slice(t, "parent after", "x", SimTime{0}, SimTime{1000}, json::object());
  }
  const json doc = json::parse(read_file(path));
  std::vector<std::string> names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") names.push_back(e["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"parent before", "parent after"}));
  std::remove(path.c_str());
}

// ---- TraceFormatError ----

// The error reading `text` as a trace file: whole (read_trace_file) and as it streams
// (summarize_file), which must say the same.
std::string error_of(const std::string& text) {
  const std::string path = temp_path("bad.json");
  write_file(path, text);
  std::string msg, streamed;
  try {
    traces::read_trace_file(path);
  } catch (const traces::TraceFormatError& e) {
    msg = e.what();
  }
  try {
    traces::summarize_file(path);
  } catch (const traces::TraceFormatError& e) {
    streamed = e.what();
  }
  std::remove(path.c_str());
  EXPECT_EQ(streamed, msg) << text;
  return msg;
}

TEST(Trace, TruncatedFileIsATraceFormatErrorSayingTruncated) {
  const std::string path = temp_path("whole.json");
  {
    traces::ChromeJsonSink sink(path);
    Synthetic().write(sink);
  }
  const std::string whole = read_file(path);
  std::remove(path.c_str());
  ASSERT_NO_THROW(traces::parse_trace(whole, "whole"));
  for (size_t keep : {whole.size() / 3, whole.size() / 2, whole.size() - 2, size_t{1}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(whole.size()));
    const std::string msg = error_of(whole.substr(0, keep));
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << "names the file: " << msg;
  }
}

TEST(Trace, NonJsonAndNonTraceJsonAndMalformedEventsAreTraceFormatErrors) {
  std::string msg = error_of("this is not json at all");
  EXPECT_NE(msg.find("not a valid JSON trace"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("truncated"), std::string::npos) << msg;

  for (const char* doc : {R"({"events": []})", R"({"traceEvents": {"ph": "X"}})", "42"}) {
    msg = error_of(doc);
    EXPECT_NE(msg.find("traceEvents"), std::string::npos) << doc << ": " << msg;
  }
  for (const char* doc :
       {R"({"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":"soon","dur":1}]})",
        R"({"traceEvents":[{"ph":"X","pid":1,"tid":1,"dur":1}]})",
        R"({"traceEvents":[{"ph":"C","pid":1,"name":"c","args":{"value":"x"},"ts":0}]})",
        R"({"traceEvents":[{"ph":"X","pid":"one","tid":1,"ts":0}]})"}) {
    msg = error_of(doc);
    EXPECT_NE(msg.find("malformed"), std::string::npos) << doc << ": " << msg;
    EXPECT_NE(msg.find("event 1"), std::string::npos) << doc << ": " << msg;
  }
  try {
    traces::read_trace_file(temp_path("does_not_exist.json"));
    ADD_FAILURE() << "expected TraceFormatError";
  } catch (const traces::TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

// ---- summaries ----

TEST(Trace, UnionLengthMergesOverlappingIntervals) {
  EXPECT_EQ(traces::union_length({}).ps, 0u);
  EXPECT_EQ(traces::union_length({{0, 10}}).ps, 10u);
  EXPECT_EQ(traces::union_length({{0, 10}, {5, 20}}).ps, 20u);
  EXPECT_EQ(traces::union_length({{0, 10}, {10, 20}}).ps, 20u);
  EXPECT_EQ(traces::union_length({{20, 30}, {0, 10}}).ps, 20u);
  EXPECT_EQ(traces::union_length({{0, 100}, {10, 20}, {30, 40}}).ps, 100u);
  EXPECT_EQ(traces::union_length({{50, 60}, {0, 10}, {5, 55}, {100, 100}}).ps, 60u);
}

SimTime ns(double v) {
  return SimTime::from_ns(v);
}

// nc0: TensorE 300 ns busy (two overlapping slices + one), VectorE 800 ns, DMA queues 600 ns
// together; two kernel launches spanning 0..1500 ns.
Trace synthetic_run(double vector_end_ns = 900) {
  Trace t;
  t.tracks = {{"nc0", "TensorE", TrackKind::kSlices, 10},
              {"nc0", "VectorE", TrackKind::kSlices, 12},
              {"nc0", "DMA q0", TrackKind::kSlices, 18},
              {"nc0", "DMA q1", TrackKind::kSlices, 19},
              {"nc0", "Kernels", TrackKind::kSlices, 0},
              {"nc0", "TensorE (LoadStationary)", TrackKind::kSlices, 11},
              {"nc0", "SBUF occupancy (bytes)", TrackKind::kCounter, 100}};
  auto add = [&](uint32_t track, const char* name, double b, double e, json args = json::object()) {
    t.slices.push_back({track, name, "", ns(b), ns(e), std::move(args)});
  };
  add(4, "k1", 0, 1000);
  add(4, "k2", 1000, 1200);
  add(4, "k1", 1200, 1500);
  add(0, "matmul", 0, 100, {{"flops", 1e6}});
  add(0, "matmul", 50, 200, {{"flops", 1e6}});
  add(0, "matmul", 400, 500, {{"flops", 1e6}});
  add(5, "load_stationary", 0, 10);
  add(1, "tensor_tensor", 100, vector_end_ns);
  add(2, "dma_copy", 0, 300, {{"bytes", 1000.0}, {"hbm_bytes", 1000.0}});
  add(3, "dma_copy", 200, 600, {{"bytes", 2000.0}, {"hbm_bytes", 0.0}});
  t.counters.push_back({6, ns(0), 4096});
  t.metadata = {
      {"preset", "trn1"},
      {"config", {{"chip.cores", 2}, {"chip.hbm_stacks", 2}}},
      {"peaks", {{"tensor_flops_per_core", 91.75e12}, {"hbm_bytes_per_s_per_stack", 410e9}}}};
  return t;
}

const traces::EngineSummary* engine(const traces::Summary& s, const std::string& name,
                                    const std::string& process = "nc0") {
  for (const auto& e : s.engines) {
    if (e.engine == name && e.process == process) return &e;
  }
  return nullptr;
}

TEST(Trace, SummarizeComputesBusyTimeUtilisationBottleneckAndTotals) {
  const traces::Summary s = traces::summarize(synthetic_run());
  EXPECT_EQ(s.preset, "trn1");
  EXPECT_EQ(s.begin.ps, 0u);
  EXPECT_EQ(s.end, ns(1500));
  ASSERT_NE(engine(s, "TensorE"), nullptr);
  EXPECT_EQ(engine(s, "TensorE")->busy, ns(300));
  EXPECT_EQ(engine(s, "TensorE")->instructions, 3u);
  EXPECT_DOUBLE_EQ(engine(s, "TensorE")->utilisation, 300.0 / 1500);
  EXPECT_EQ(engine(s, "VectorE")->busy, ns(800));
  EXPECT_EQ(engine(s, "DMA q0")->busy, ns(300));
  EXPECT_EQ(engine(s, "DMA (all queues)")->busy, ns(600));
  EXPECT_EQ(engine(s, "DMA (all queues)")->instructions, 2u);
  EXPECT_EQ(engine(s, "Kernels"), nullptr);
  // The LoadStationary row is listed, but neither a bottleneck candidate nor an active core.
  ASSERT_NE(engine(s, "TensorE (LoadStationary)"), nullptr);
  EXPECT_EQ(engine(s, "TensorE (LoadStationary)")->busy, ns(10));
  EXPECT_EQ(s.active_cores, std::vector<std::string>{"nc0"});
  EXPECT_EQ(s.bottleneck, "nc0 VectorE");
  EXPECT_DOUBLE_EQ(s.bottleneck_utilisation, 800.0 / 1500);
  EXPECT_DOUBLE_EQ(s.flops, 3e6);
  EXPECT_DOUBLE_EQ(s.dma_bytes, 3000);
  EXPECT_DOUBLE_EQ(s.hbm_bytes, 1000);
  EXPECT_NEAR(s.achieved_flops_per_s, 3e6 / 1.5e-6, 1);
  EXPECT_NEAR(s.achieved_hbm_bytes_per_s, 1000 / 1.5e-6, 1e-3);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 91.75e12);  // one active core
  EXPECT_DOUBLE_EQ(s.peak_hbm_bytes_per_s, 410e9);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].name, "k1");  // longest total first
  EXPECT_EQ(s.kernels[0].launches, 2u);
  EXPECT_EQ(s.kernels[0].total, ns(1300));
  EXPECT_EQ(s.kernels[1].total, ns(200));
  EXPECT_EQ(s.to_json().at("bottleneck"), "nc0 VectorE");

  // A short VectorE makes the DMA queues, taken together, the bottleneck.
  EXPECT_EQ(traces::summarize(synthetic_run(200)).bottleneck, "nc0 DMA (all queues)");
}

TEST(Trace, SummarizeCountsPeaksPerActiveCoreAndStack) {
  Trace t = synthetic_run();
  t.tracks.push_back({"nc1", "TensorE", TrackKind::kSlices, 10});
  t.slices.push_back({static_cast<sim::TrackId>(t.tracks.size() - 1),
                      "matmul",
                      "",
                      ns(0),
                      ns(10),
                      {{"flops", 2e6}}});
  traces::Summary s = traces::summarize(t);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_s, 2 * 91.75e12);
  EXPECT_DOUBLE_EQ(s.peak_hbm_bytes_per_s, 2 * 410e9);  // trn1: one core per stack
  EXPECT_DOUBLE_EQ(s.flops, 5e6);
  ASSERT_NE(engine(s, "TensorE", "nc1"), nullptr);
  t.metadata["config"] = {{"chip.cores", 8}, {"chip.hbm_stacks", 4}};  // trn2: two per stack
  EXPECT_DOUBLE_EQ(traces::summarize(t).peak_hbm_bytes_per_s, 410e9);
  EXPECT_EQ(traces::summarize(Trace{}).duration().ps, 0u);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(Trace, FormatSummaryAndDiffContainTheExpectedRows) {
  const traces::Summary a = traces::summarize(synthetic_run());
  const std::string text = traces::format_summary(a);
  for (const char* row :
       {"simulated time     1.500 us", "preset trn1", "bottleneck         nc0 VectorE (53.3% busy)",
        "TensorE FLOP/s     2.00 TFLOP/s", "HBM bandwidth",
        "bytes moved        2.93 KiB by DMA, 1000 B to/from HBM"}) {
    EXPECT_TRUE(contains(text, row)) << row << "\n" << text;
  }
  for (const char* row :
       {"nc0    TensorE", "nc0    VectorE", "nc0    DMA (all queues)", "nc0    DMA q1"}) {
    EXPECT_TRUE(contains(text, row)) << row << "\n" << text;
  }
  // Kernel rows: name, launches, total.
  std::istringstream lines(text);
  std::string line;
  bool k1_row = false;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name, launches, total, unit;
    words >> name >> launches >> total >> unit;
    k1_row |= name == "k1" && launches == "2" && total == "1.300" && unit == "us";
  }
  EXPECT_TRUE(k1_row) << text;

  traces::Summary b = traces::summarize(synthetic_run(200));
  const std::string diff = traces::format_diff(a, b, "base", "short vector");
  for (const char* row : {"A = base", "B = short vector", "simulated time (us)", "TensorE TFLOP/s",
                          "bottleneck: A nc0 VectorE", "B nc0 DMA (all queues)", "nc0 VectorE",
                          "nc0 DMA q0", "kernel total (us)", "k2"}) {
    EXPECT_TRUE(contains(diff, row)) << row << "\n" << diff;
  }
  // VectorE busy 0.8 us -> 0.1 us.
  EXPECT_TRUE(contains(diff, "0.125x")) << diff;
  const nlohmann::json d = traces::diff_json(a.to_json(), b.to_json());
  const auto vector =
      std::find_if(d["engines"].begin(), d["engines"].end(),
                   [](const nlohmann::json& e) { return e["engine"] == "nc0 VectorE"; });
  ASSERT_NE(vector, d["engines"].end());
  EXPECT_DOUBLE_EQ((*vector)["busy_ns_b"].get<double>() / (*vector)["busy_ns_a"].get<double>(),
                   0.125);
}

// ---- a real run ----

TEST(Trace, RealRunHasOneTrackPerEngineAndSlicesNestedInTheirKernel) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const device_model::Program p = small_gemm(dev->params().core);
  traces::MemoryTraceSink sink;
  dev->set_trace_sink(&sink);
  dev->run(0, p);
  dev->run(0, p);  // a second launch reuses the tracks
  const Trace& t = sink.trace();

  std::set<std::string> expected = {"Kernels"};
  for (const auto& s : p.streams) {
    for (const auto& in : s.instructions) {
      if (!in.is_sync()) expected.insert(s.id.display_name());
    }
  }
  expected.insert("TensorE (LoadStationary)");
  std::map<std::string, int> slice_tracks;
  for (const auto& tr : t.tracks) {
    if (tr.kind == TrackKind::kSlices) ++slice_tracks[tr.process + "/" + tr.name];
  }
  std::set<std::string> names;
  for (const auto& [key, n] : slice_tracks) {
    EXPECT_EQ(n, 1) << key << " has " << n << " tracks";
    ASSERT_EQ(key.rfind("nc0/", 0), 0u) << key;
    names.insert(key.substr(4));
  }
  EXPECT_EQ(names, expected);
  EXPECT_EQ(names.count("GpSimdE"), 0u);

  std::vector<SliceRecord> kernels;
  std::map<sim::TrackId, std::vector<const SliceRecord*>> by_track;
  for (const auto& s : t.slices) {
    ASSERT_LT(s.track, t.tracks.size());
    if (t.tracks[s.track].name == "Kernels")
      kernels.push_back(s);
    else
      by_track[s.track].push_back(&s);
  }
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].end, kernels[1].begin);
  for (const auto& [track, slices] : by_track) {
    const std::string& row = t.tracks[track].name;
    for (size_t i = 0; i < slices.size(); ++i) {
      const SliceRecord& s = *slices[i];
      const bool in_kernel = std::any_of(kernels.begin(), kernels.end(), [&](const auto& k) {
        return s.begin >= k.begin && s.end <= k.end && s.args.value("kernel", "") == k.name;
      });
      EXPECT_TRUE(in_kernel) << row << " slice " << i << " [" << s.begin.ps << ", " << s.end.ps
                             << "] outside its kernel";
      EXPECT_LE(s.begin, s.end);
      // One engine or queue does one thing at a time, in order.
      if (i > 0) EXPECT_GE(s.begin, slices[i - 1]->end) << row << " slice " << i;
    }
  }
  std::map<sim::TrackId, SimTime> last_counter;
  for (const auto& c : t.counters) {
    auto [it, added] = last_counter.try_emplace(c.track, c.t);
    if (!added) EXPECT_GE(c.t, it->second) << t.tracks[c.track].name;
    it->second = c.t;
  }
  EXPECT_FALSE(last_counter.empty());

  // A new sink gets its own tracks (engines must not reuse the old sink's track ids).
  traces::MemoryTraceSink second;
  dev->set_trace_sink(&second);
  dev->run(0, p);
  dev->set_trace_sink(nullptr);
  std::set<std::string> second_names;
  for (const auto& s : second.trace().slices) {
    ASSERT_LT(s.track, second.trace().tracks.size());
    second_names.insert(second.trace().tracks[s.track].name);
  }
  EXPECT_EQ(second_names, expected);
}

// Counter samples of one track come in time order even when engines finish out of order: the SBUF
// occupancy after a long VectorE write and a short ScalarE write that ends first.
TEST(Trace, CounterSamplesAreInTimeOrderAcrossEngines) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  namespace isa = device_model::isa;
  using device_model::DType;
  device_model::Program p;
  p.name = "out_of_order";
  const auto src = isa::sbuf_tile(DType::kFp32, 128, 0, 16);
  p.stream(kernels::kVector)
      .instructions.push_back(
          isa::tensor_copy(isa::sbuf_tile(DType::kFp32, 128, 4096, 8192),
                           isa::sbuf(DType::kFp32, 0, 128, 65536, {{1, 8192}})));
  for (int i = 0; i < 4; ++i) {
    p.stream(kernels::kScalar)
        .instructions.push_back(
            isa::activation(isa::sbuf_tile(DType::kFp32, 128, 1024 + i * 64, 16), src,
                            device_model::ActFunc::kExp));
  }
  traces::MemoryTraceSink sink;
  dev->set_trace_sink(&sink);
  dev->run(0, p);
  dev->set_trace_sink(nullptr);
  const Trace& t = sink.trace();
  std::vector<traces::CounterRecord> sbuf;
  for (const auto& c : t.counters) {
    if (t.tracks[c.track].name == "SBUF occupancy (bytes)") sbuf.push_back(c);
  }
  ASSERT_GE(sbuf.size(), 3u);
  for (size_t i = 1; i < sbuf.size(); ++i) {
    EXPECT_GE(sbuf[i].t, sbuf[i - 1].t) << "sample " << i;
    EXPECT_GE(sbuf[i].value, sbuf[i - 1].value) << "occupancy only grows within a run";
  }
  EXPECT_DOUBLE_EQ(sbuf.back().value, 128.0 * (8192 * 4 + 4 * 64));
}

// ---- compact record args ----

// TraceArgs serialise to the text nlohmann::json dumps for the same members: keys sorted, the
// last entry of a key winning, numbers and escapes as nlohmann writes them; deferred strings
// formatted by their function.
struct Pair {
  int a, b;
};
void append_pair(const Pair& p, std::string& out) {
  out += std::to_string(p.a) + "x" + std::to_string(p.b);
}

TEST(Trace, TraceArgsWriteWhatNlohmannDumpsForTheSameMembers) {
  const Pair pair{3, 7};
  const std::string owned = "tab\there \"quoted\" é";
  sim::TraceArgs a{
      {"zeta", 1},       {"alpha", -2},         {"uint", uint64_t{18446744073709551615u}},
      {"whole", 64.0},   {"tenth", 0.1},        {"tiny", 1e-7},
      {"huge", 1.5e300}, {"nan", std::nan("")}, {"neg_zero", -0.0},
      {"flag", true},    {"text", owned}};
  a.add({"zeta", 99});  // replaces the first zeta
  a.add_deferred<Pair, &append_pair>("pair", pair);
  a.add_json_text("inputs", R"([{"device":"neuron:0","shape":[2,3]},1.0,null])");
  json want = {{"zeta", 99},
               {"alpha", -2},
               {"uint", uint64_t{18446744073709551615u}},
               {"whole", 64.0},
               {"tenth", 0.1},
               {"tiny", 1e-7},
               {"huge", 1.5e300},
               {"nan", std::nan("")},
               {"neg_zero", -0.0},
               {"flag", true},
               {"text", owned},
               {"pair", "3x7"},
               {"inputs", json::parse(R"([{"device":"neuron:0","shape":[2,3]},1.0,null])")}};
  std::string text;
  a.append_json(text);
  EXPECT_EQ(text, want.dump());
  EXPECT_EQ(a.to_json().dump(), want.dump());

  // More entries than fit inline, and JSON members given first.
  sim::TraceArgs many(json{{"b", "from json"}, {"k0", "replaced"}});
  json many_want = {{"b", "from json"}};
  for (int i = 0; i < 20; ++i) {
    static const std::vector<std::string> keys = [] {
      std::vector<std::string> k;
      for (int j = 0; j < 20; ++j) k.push_back(fmt::format("k{}", j));
      return k;
    }();
    many.add({keys[i], i});
    many_want[keys[i]] = i;
  }
  text.clear();
  many.append_json(text);
  EXPECT_EQ(text, many_want.dump());
  text.clear();
  sim::TraceArgs{}.append_json(text);
  EXPECT_EQ(text, "{}");
}

// A real run's trace file: each slice's args in the file are the args the in-memory sink kept
// (deferred operands formatted on the writer thread), and the summary of the file read as it
// streams is the summary of the file read whole, and of the records themselves.
TEST(Trace, FileArgsAndStreamedSummaryOfARealRunMatchTheRecords) {
  auto dev = testing::make_device("trn1", {}, device_model::ExecMode::kTiming);
  const device_model::Program p = small_gemm(dev->params().core);
  const std::string path = temp_path("real.json");
  traces::MemoryTraceSink memory;
  {
    traces::ChromeJsonSink file(path);
    traces::TeeTraceSink tee({&file, &memory});
    dev->set_trace_sink(&tee);
    dev->run(0, p);
    dev->run(0, p);
    dev->set_trace_sink(nullptr);
    const json meta = {{"device_time_ns", 1.0},
                       {"peaks", {{"tensor_flops_per_core", 91.75e12}}},
                       {"preset", "trn1"}};
    for (const auto& [k, v] : meta.items()) tee.metadata(k, v);
    file.finish();
  }
  const Trace whole = traces::read_trace_file(path);
  const Trace& kept = memory.trace();
  ASSERT_EQ(whole.slices.size(), kept.slices.size());
  ASSERT_GT(kept.slices.size(), 10u);
  for (size_t i = 0; i < kept.slices.size(); ++i) {
    EXPECT_EQ(whole.slices[i].args, kept.slices[i].args) << "slice " << i;
    EXPECT_EQ(whole.slices[i].name, kept.slices[i].name) << "slice " << i;
  }
  const json streamed = traces::summary_document_file(path, false);
  EXPECT_EQ(streamed, traces::summarize(whole).to_json());
  EXPECT_EQ(streamed, traces::summary_document(read_file(path), path, false));
  json from_records = traces::summarize(kept).to_json();
  EXPECT_EQ(streamed["engines"], from_records["engines"]);
  EXPECT_EQ(streamed["kernels"], from_records["kernels"]);
  EXPECT_EQ(traces::trace_metadata_file(path).at("preset"), "trn1");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace neuronsim
