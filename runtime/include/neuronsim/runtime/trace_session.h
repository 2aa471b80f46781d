#pragma once
// One timeline for a whole PyTorch program (neuronsim run --trace, NEURON_SIM_TRACE): PyTorch op
// ranges and Python ranges on the host clock, each op's device span above the kernels it
// launched, the kernels' instructions on per-engine and per-DMA-queue tracks, and host-side costs
// (launch overhead, CPU fallbacks, host<->device copies) on their own rows. Torch-free.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/runtime/runtime.h"
#include "neuronsim/traces/sinks.h"

namespace neuronsim::runtime {

class TraceSession {
 public:
  /// The session being recorded, or null.
  static TraceSession* active();
  /// Starts recording to `path` (Chrome trace-event JSON); throws if one is active.
  static void start(Runtime& rt, const std::string& path);
  /// Finishes the file (adding `metadata`) and ends the session.
  static void stop(Runtime& rt, const nlohmann::json& metadata);

  /// An ATen op starts on the host clock; `inputs_json` is the JSON text of its arguments'
  /// description (shapes, dtypes, scalars: its slices' "inputs").
  void op_begin(Runtime& rt, std::string_view name, std::string_view inputs_json);
  void op_end(Runtime& rt);
  /// A kernel launched on a logical device, with its device span.
  void kernel(uint32_t physical_core, sim::SimTime start, sim::SimTime end);
  /// A host-side cost on the host clock ("launch", "fallback aten::x", "copy").
  void host(std::string_view name, std::string_view category, sim::SimTime begin, sim::SimTime end,
            const sim::TraceArgs& args = {});
  void range_push(Runtime& rt, const std::string& name);
  void range_pop(Runtime& rt);

 private:
  // An op being recorded. Frames are reused (ops_ only grows): an op allocates nothing once
  // its names fit the buffers of an earlier op at the same depth.
  struct OpFrame {
    std::string name, inputs;
    sim::SimTime host_begin;
    std::vector<std::pair<sim::SimTime, sim::SimTime>> per_core;  // device span per core
    std::vector<bool> has_kernel;
  };
  struct Range {
    std::string name;
    sim::SimTime begin;
  };
  TraceSession(Runtime& rt, const std::string& path);
  sim::TrackId core_ops_track(uint32_t core);

  std::unique_ptr<traces::ChromeJsonSink> sink_;
  sim::SimTime begin_;  // the host or device clock when recording started, whichever is later
  sim::TrackId ops_track_ = 0, python_track_ = 0, host_track_ = 0;
  std::vector<sim::TrackId> core_ops_;  // id + 1, 0 = not created
  std::vector<OpFrame> ops_;
  size_t open_ops_ = 0;  // ops_[0, open_ops_) are the ops being recorded, outermost first
  std::vector<Range> ranges_;
  uint32_t cores_ = 0;
};

}  // namespace neuronsim::runtime
