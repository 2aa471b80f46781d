// Eager ops launch their programs at once, one launch per program, charging the host's launch
// overhead, each on the trace and the profiler's activity record.
#include "accelerator/context.h"
#include "aten/op_capture.h"
#include "host_stages.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"
#include "profiler/activity_recorder.h"

namespace neuronsim::backend {
namespace {

class EagerCapture final : public OpCapture {
 public:
  bool eager() const override { return true; }
  bool builds_programs() const override { return true; }
  uint32_t grid(runtime::Runtime& r) const override {
    return r.device().params().logical_core_size;
  }
  void take(const c10::Device& device, const std::vector<device_model::Program>& programs,
            bool functional, bool validated) const override {
    with_runtime([&](runtime::Runtime& r) {
      const uint32_t dev = static_cast<uint32_t>(device.index());
      const int64_t stream = current_stream(device.index()).id();
      runtime::TraceSession* trace = runtime::TraceSession::active();
      for (const auto& p : programs) {
        const sim::SimTime h0 = r.charge_launch_overhead();
        device_model::RunResult res;
        {
          sim::HostStageScope stage(stages::kLaunch);
          res = r.launch(dev, stream, p, functional, validated);
        }
        sim::HostStageScope stage(stages::kTrace);
        if (trace) {
          trace->host("launch " + p.name, "launch", h0, r.host_time());
          for (const auto& c : res.cores) trace->kernel(c.core, c.start, c.end);
        }
        ActivityRecorder::get().on_launch(p.name, res);
      }
      return 0;
    });
  }
};

}  // namespace

const OpCapture& eager_capture() {
  static const EagerCapture capture;
  return capture;
}

}  // namespace neuronsim::backend
