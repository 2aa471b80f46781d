#include "neuronsim/runtime/device_sinks.h"

#include <array>
#include <memory>

#include "neuronsim/traces/sinks.h"

namespace neuronsim::runtime {

void set_device_sink(Runtime& rt, SinkRole role, sim::TraceSink* sink) {
  static std::array<sim::TraceSink*, 3> sinks{nullptr, nullptr, nullptr};
  static std::unique_ptr<traces::TeeTraceSink> tee;
  sinks[static_cast<size_t>(role)] = sink;
  std::vector<sim::TraceSink*> live;
  for (auto* s : sinks) {
    if (s) live.push_back(s);
  }
  if (live.empty()) {
    rt.device().set_trace_sink(nullptr);
    tee.reset();
  } else if (live.size() == 1) {
    rt.device().set_trace_sink(live[0]);
    tee.reset();
  } else {
    auto next = std::make_unique<traces::TeeTraceSink>(live);
    rt.device().set_trace_sink(next.get());
    tee = std::move(next);
  }
}

}  // namespace neuronsim::runtime
