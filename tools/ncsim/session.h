#pragma once
// A configured device plus the sinks of one ncsim invocation.
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "neuronsim/device_model/device.h"
#include "neuronsim/traces/sinks.h"
#include "neuronsim/traces/summary.h"

namespace ncsim {

class Session {
 public:
  /// Builds the device from the preset and overrides; traces to `trace_path` when not empty and
  /// always keeps an in-memory copy for the summary.
  Session(const DeviceArgs& args, uint32_t cores, const std::string& trace_path);
  neuronsim::device_model::Device& device() { return *device_; }
  /// Closes the trace file and summarises the run.
  neuronsim::traces::Summary finish();

 private:
  std::unique_ptr<neuronsim::device_model::Device> device_;
  std::unique_ptr<neuronsim::traces::ChromeJsonSink> file_;
  neuronsim::traces::MemoryTraceSink memory_;
  std::unique_ptr<neuronsim::traces::TeeTraceSink> tee_;
};

}  // namespace ncsim
