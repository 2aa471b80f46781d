#include "profiler/activity_recorder.h"

#include <c10/util/ApproximateClock.h>

#include <set>

#include "accelerator/context.h"
#include "neuronsim/runtime/device_sinks.h"

namespace neuronsim::backend {
namespace {
thread_local std::vector<uint64_t> t_correlation;
}

ActivityRecorder& ActivityRecorder::get() {
  static ActivityRecorder r;
  return r;
}

void ActivityRecorder::start() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  activities_.clear();
  sink_ = std::make_unique<traces::MemoryTraceSink>();
  runtime::set_device_sink(rt(), runtime::SinkRole::kProfiler, sink_.get());
  active_ = true;
}

void ActivityRecorder::stop() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (!active_) return;
  active_ = false;
  runtime::set_device_sink(rt(), runtime::SinkRole::kProfiler, nullptr);
  sink_.reset();
}

void ActivityRecorder::push_correlation(uint64_t id) {
  t_correlation.push_back(id);
}
void ActivityRecorder::pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}

int32_t ActivityRecorder::resource_of(int32_t device, const std::string& row) {
  auto [it, added] =
      resources_.try_emplace({device, row}, static_cast<int32_t>(resources_.size() + 1));
  return it->second;
}

void ActivityRecorder::on_launch(const std::string& kernel, const device_model::RunResult& r) {
  if (!active_ || !sink_) return;
  const int64_t wall = c10::getTime();
  const uint64_t corr = t_correlation.empty() ? 0 : t_correlation.back();
  for (const auto& c : r.cores) {
    const int32_t dev = static_cast<int32_t>(c.core);
    DeviceActivity k;
    k.name = "kernel " + kernel;  // distinct from the ATen op row of the same name
    k.device = dev;
    k.resource = resource_of(dev, "Kernels");
    k.start_ns = wall;
    k.end_ns = wall + static_cast<int64_t>((c.end - c.start).ps / 1000);
    k.correlation = corr;
    k.kernel = kernel;
    activities_.push_back(k);
    // The kernel's instructions, on their engine rows.
    traces::Trace& t = sink_->trace();
    for (const auto& s : t.slices) {
      const sim::TrackInfo& tr = t.tracks.at(s.track);
      if (tr.name == "Kernels" || s.begin < c.start || s.end > c.end) continue;
      if (tr.process != "nc" + std::to_string(c.core)) continue;
      DeviceActivity a;
      a.name = tr.name + " " + s.name;
      a.device = dev;
      a.resource = resource_of(dev, tr.name);
      a.start_ns = wall + static_cast<int64_t>((s.begin - c.start).ps / 1000);
      a.end_ns = std::max(a.start_ns + 1, wall + static_cast<int64_t>((s.end - c.start).ps / 1000));
      a.kernel = kernel;
      activities_.push_back(std::move(a));
    }
  }
  sink_->trace().slices.clear();
  sink_->trace().counters.clear();
}

std::vector<DeviceActivity> ActivityRecorder::take() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  return std::move(activities_);
}

std::vector<ActivityResource> ActivityRecorder::resources() const {
  std::vector<ActivityResource> out;
  for (const auto& [key, id] : resources_) out.push_back({id, key.first, key.second});
  return out;
}

std::vector<int32_t> ActivityRecorder::devices() const {
  std::set<int32_t> d;
  for (const auto& [key, id] : resources_) d.insert(key.first);
  return {d.begin(), d.end()};
}

}  // namespace neuronsim::backend
