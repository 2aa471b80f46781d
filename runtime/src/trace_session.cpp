#include "neuronsim/runtime/trace_session.h"

#include <fmt/format.h>

#include "neuronsim/runtime/device_sinks.h"

#include <stdexcept>

namespace neuronsim::runtime {
namespace {
std::unique_ptr<TraceSession>& slot() {
  static std::unique_ptr<TraceSession> s;
  return s;
}
}  // namespace

TraceSession* TraceSession::active() {
  return slot().get();
}

TraceSession::TraceSession(Runtime& rt, const std::string& path)
    : sink_(std::make_unique<traces::ChromeJsonSink>(path)),
      begin_(sim::max(rt.host_time(), rt.device_time())) {
  cores_ = rt.device().num_cores();
  core_ops_.assign(cores_, 0);
  python_track_ = sink_->add_track({"host", "Python", sim::TrackKind::kSlices, 0});
  ops_track_ = sink_->add_track({"host", "ATen ops", sim::TrackKind::kSlices, 1});
  host_track_ = sink_->add_track({"host", "Host runtime", sim::TrackKind::kSlices, 2});
  set_device_sink(rt, SinkRole::kTraceSession, sink_.get());
}

void TraceSession::start(Runtime& rt, const std::string& path) {
  if (slot()) throw std::runtime_error("a neuronsim trace is already being recorded");
  slot().reset(new TraceSession(rt, path));
}

void TraceSession::stop(Runtime& rt, const nlohmann::json& metadata) {
  if (!slot()) return;
  TraceSession& s = *slot();
  while (s.open_ops_ > 0) s.op_end(rt);
  while (!s.ranges_.empty()) s.range_pop(rt);
  rt.synchronize();
  for (auto it = metadata.begin(); it != metadata.end(); ++it)
    s.sink_->metadata(it.key(), it.value());
  // The recorded window: what the summary's account of the time splits (time_account.h).
  s.sink_->metadata("begin_ns", s.begin_.ns());
  s.sink_->metadata("end_ns", sim::max(rt.host_time(), rt.device_time()).ns());
  s.sink_->metadata("device_time_ns", rt.device_time().ns());
  s.sink_->metadata("host_time_ns", rt.host_time().ns());
  set_device_sink(rt, SinkRole::kTraceSession, nullptr);
  s.sink_->finish();
  slot().reset();
}

sim::TrackId TraceSession::core_ops_track(uint32_t core) {
  if (core_ops_[core] == 0) {
    core_ops_[core] =
        sink_->add_track({fmt::format("nc{}", core), "Ops", sim::TrackKind::kSlices, -1}) + 1;
  }
  return core_ops_[core] - 1;
}

void TraceSession::op_begin(Runtime& rt, std::string_view name, std::string_view inputs_json) {
  if (open_ops_ == ops_.size()) ops_.emplace_back();
  OpFrame& f = ops_[open_ops_++];
  f.name.assign(name);
  f.inputs.assign(inputs_json);
  f.host_begin = rt.host_time();
  f.per_core.assign(cores_, {});
  f.has_kernel.assign(cores_, false);
}

void TraceSession::op_end(Runtime& rt) {
  if (open_ops_ == 0) return;
  OpFrame& f = ops_[--open_ops_];
  sim::SimTime host_end = rt.host_time();
  if (host_end == f.host_begin) host_end = host_end + sim::SimTime{1000};  // 1 ns: visible
  sim::TraceArgs args;
  args.add_json_text("inputs", f.inputs);
  int kernels = 0;
  for (uint32_t c = 0; c < cores_; ++c) {
    if (!f.has_kernel[c]) continue;
    ++kernels;
    sink_->slice(core_ops_track(c), f.name, "op", f.per_core[c].first, f.per_core[c].second, args);
    // The enclosing op (if any) spans this op's kernels too.
    if (open_ops_ > 0) {
      OpFrame& parent = ops_[open_ops_ - 1];
      auto& span = parent.per_core[c];
      if (!parent.has_kernel[c]) {
        span = f.per_core[c];
      } else {
        if (f.per_core[c].first < span.first) span.first = f.per_core[c].first;
        span.second = sim::max(span.second, f.per_core[c].second);
      }
      parent.has_kernel[c] = true;
    }
  }
  args.add({"kernels_on_cores", kernels});
  sink_->slice(ops_track_, f.name, "op", f.host_begin, host_end, args);
}

void TraceSession::kernel(uint32_t core, sim::SimTime start, sim::SimTime end) {
  if (open_ops_ == 0) return;  // parents take it over in op_end
  OpFrame& f = ops_[open_ops_ - 1];
  auto& span = f.per_core.at(core);
  if (!f.has_kernel[core]) {
    span = {start, end};
    f.has_kernel[core] = true;
  } else {
    if (start < span.first) span.first = start;
    span.second = sim::max(span.second, end);
  }
}

void TraceSession::host(std::string_view name, std::string_view category, sim::SimTime b,
                        sim::SimTime e, const sim::TraceArgs& args) {
  sink_->slice(host_track_, name, category, b, e, args);
}

void TraceSession::range_push(Runtime& rt, const std::string& name) {
  ranges_.push_back({name, rt.host_time()});
}

void TraceSession::range_pop(Runtime& rt) {
  if (ranges_.empty()) return;
  Range r = std::move(ranges_.back());
  ranges_.pop_back();
  sim::SimTime end = sim::max(rt.host_time(), r.begin + sim::SimTime{1000});
  sink_->slice(python_track_, r.name, "python", r.begin, end, {});
}

}  // namespace neuronsim::runtime
