// torch.profiler integration: a Kineto child profiler for the neuron device
// (REGISTER_PRIVATEUSE1_PROFILER). Kernel activities link to the ATen ops that launched them, so
// prof.key_averages() shows device time per op, and export_chrome_trace() carries one row per
// engine and DMA queue of each NeuronCore.
#include <ActivityType.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <deque>
#include <memory>
#include <set>

#include "profiler/activity_recorder.h"

namespace neuronsim::backend {
namespace {

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    ActivityRecorder::get().start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    ActivityRecorder::get().stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }
  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(
        logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    auto acts = ActivityRecorder::get().take();
    int64_t lo = 0, hi = 0;
    for (const auto& a : acts) {
      lo = lo == 0 ? a.start_ns : std::min(lo, a.start_ns);
      hi = std::max(hi, a.end_ns);
    }
    buffer_.span = libkineto::TraceSpan(lo, hi, "neuron");
    int32_t id = 1;
    for (const auto& a : acts) {
      auto act = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_.span, libkineto::ActivityType::CONCURRENT_KERNEL, a.name);
      act->startTime = a.start_ns;
      act->endTime = a.end_ns;
      act->id = id++;
      act->device = a.device;
      act->resource = a.resource;
      act->addMetadataQuoted("kernel", a.kernel);
      act->addMetadataQuoted("clock", "simulated duration, placed at the launch's wall time");
      if (a.correlation) act->linked = linked(static_cast<int32_t>(a.correlation));
      act->log(logger);
      buffer_.activities.push_back(std::move(act));
    }
  }
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(0, 0, "neuron", "NeuronCore (simulated)");
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& r : ActivityRecorder::get().resources()) {
      out.emplace_back(r.id, r.id, r.device, "nc" + std::to_string(r.device) + " " + r.name);
    }
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }
  void pushCorrelationId(uint64_t id) override { ActivityRecorder::get().push_correlation(id); }
  void popCorrelationId() override { ActivityRecorder::get().pop_correlation(); }

 private:
  libkineto::CpuTraceBuffer buffer_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return types_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>&, const libkineto::Config&) override {
    return std::make_unique<NeuronProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<libkineto::ActivityType> types_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                           libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace
}  // namespace neuronsim::backend

using NeuronActivityProfiler = neuronsim::backend::NeuronActivityProfiler;
REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);
