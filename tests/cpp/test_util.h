#pragma once
// Shared helpers for the C++ tests: a device per test process, programs from the kernel library.
#include <memory>
#include <string>
#include <vector>

#include "neuronsim/device_model/device.h"
#include "neuronsim/traces/sinks.h"
#include "neuronsim/traces/summary.h"

namespace neuronsim::testing {

/// Builds the test process's Device (one per process) from a preset and overrides.
inline std::unique_ptr<device_model::Device> make_device(
    const std::string& preset = "trn1", const std::vector<std::string>& overrides = {},
    device_model::ExecMode mode = device_model::ExecMode::kFull, uint32_t cores = 1) {
  device_model::Config c = device_model::Config::load(preset);
  c.apply_overrides(overrides);
  device_model::DeviceOptions o;
  o.cores = cores;
  o.mode = mode;
  return std::make_unique<device_model::Device>(c, o);
}

/// Runs one program on core 0 with an in-memory trace and returns the summary.
inline traces::Summary run_and_summarize(device_model::Device& dev,
                                         const device_model::Program& p) {
  traces::MemoryTraceSink sink;
  dev.set_trace_sink(&sink);
  dev.run(0, p);
  dev.set_trace_sink(nullptr);
  return traces::summarize(sink.trace());
}

}  // namespace neuronsim::testing
