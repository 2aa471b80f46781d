// Re-timing a recorded run (runtime/run_log.h): the log keeps the runtime calls that move the
// clocks and each distinct program once; replayed, it repeats the run's times exactly.
#include <gtest/gtest.h>

#include <string>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/runtime/run_log.h"
#include "neuronsim/runtime/run_replay.h"
#include "neuronsim/runtime/runtime.h"

namespace neuronsim {
namespace {

using sim::SimTime;

// One DMA queue per 128 x 512 fp32 tile of `tiles`: a kernel of a few microseconds.
device_model::Program loads(runtime::Runtime& rt, const std::string& name, uint8_t tiles) {
  device_model::Program p;
  p.name = name;
  const uint64_t buf = rt.hbm_address(rt.malloc(0, 1 << 20));
  for (uint8_t q = 0; q < tiles; ++q) {
    device_model::Stream st;
    st.id = {device_model::EngineKind::kDma, q};
    st.instructions.push_back(device_model::isa::dma_copy(
        device_model::isa::sbuf_tile(device_model::DType::kFp32, 128, q * 2048u, 512),
        device_model::isa::hbm_rows(device_model::DType::kFp32, buf + (uint64_t{q} << 18), 128, 512,
                                    512)));
    p.streams.push_back(std::move(st));
  }
  return p;
}

struct Clocks {
  SimTime host, device;
  traces::TimeAccount account;
};

// A run with launches, a second stream waiting on an event, a copy and a CPU fallback.
Clocks run(runtime::Runtime& rt, const device_model::Program& a, const device_model::Program& b) {
  const SimTime h0 = rt.host_time();
  const int64_t side = rt.new_stream(0);
  for (int i = 0; i < 3; ++i) {
    rt.charge_launch_overhead();
    rt.launch(0, 0, a, false);
  }
  runtime::Event done;
  rt.record(done, 0, 0);
  rt.wait_event(done, 0, side);
  rt.charge_launch_overhead();
  rt.launch(0, side, b, false);
  rt.copy_host(0, side, 1 << 20, false, rt.hbm_address(rt.malloc(0, 1 << 20)), false);
  rt.charge_cpu_fallback();
  rt.charge_launch_overhead();
  rt.launch(0, 0, a, false);
  rt.synchronize();
  return {rt.host_time() - h0, rt.device_time() - h0, rt.time_account()};
}

TEST(RunLog, ReplayRepeatsTheRecordedRunAndKeepsEachProgramOnce) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  const device_model::Program a = loads(rt, "four", 4), b = loads(rt, "two", 2);
  runtime::RunLog log(nlohmann::json{{"preset", "trn1"}});
  rt.set_run_log(&log);
  const Clocks first = run(rt, a, b);
  rt.set_run_log(nullptr);
  EXPECT_TRUE(log.replayable());
  EXPECT_EQ(log.launches(), 5u);
  EXPECT_EQ(log.programs().size(), 2u);  // "four" launched four times, kept once

  // Through its JSON form, on the same runtime: every clock moves by what it moved first.
  const runtime::RunLog read = runtime::RunLog::from_json(log.to_json(), "test");
  EXPECT_EQ(read.entries().size(), log.entries().size());
  const SimTime h0 = rt.host_time();
  ASSERT_EQ(h0, rt.device_time());
  runtime::replay(read, rt);
  EXPECT_EQ(rt.host_time() - h0, first.host);
  EXPECT_EQ(rt.device_time() - h0, first.device);
  const traces::TimeAccount twice = rt.time_account();
  for (size_t p = 0; p < traces::kTimePartCount; ++p) {
    EXPECT_EQ(twice.exposed[p].ps, 2 * first.account.exposed[p].ps)
        << traces::time_part_name(static_cast<traces::TimePart>(p));
  }
}

TEST(RunLog, ACollectiveMakesTheRunUnreplayableAndADamagedLogIsAnError) {
  runtime::Runtime& rt = runtime::Runtime::instance();
  runtime::RunLog log;
  rt.set_run_log(&log);
  rt.arrival(0, 0);
  rt.set_run_log(nullptr);
  EXPECT_FALSE(log.replayable());
  EXPECT_NE(log.why_not().find("collectives"), std::string::npos);
  EXPECT_THROW(runtime::replay(log, rt), std::runtime_error);

  nlohmann::json j = runtime::RunLog().to_json();
  j["entries"] = nlohmann::json::array({nlohmann::json::array({0, 0, 0, 7, 0, 0, 0})});
  try {
    runtime::RunLog::from_json(j, "bad.json");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: a damaged run log"), std::string::npos);
  }
  EXPECT_THROW(runtime::RunLog::from_json(nlohmann::json{{"format", "x"}}, "x"),
               std::runtime_error);
}

}  // namespace
}  // namespace neuronsim
