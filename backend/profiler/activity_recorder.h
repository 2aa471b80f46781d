#pragma once
// Device activity for torch.profiler: while a profiler session runs, every kernel launch is
// recorded (linked to the ATen op that launched it through Kineto's correlation ids) together
// with the instructions it ran on each engine and DMA queue. Simulated durations are placed on
// the wall clock at the moment of the launch, so the device rows line up with the CPU ops.
#include <c10/util/ApproximateClock.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "neuronsim/device_model/device.h"
#include "neuronsim/traces/sinks.h"

namespace neuronsim::backend {

struct DeviceActivity {
  std::string name;
  int32_t device = 0;                    // NeuronCore
  int32_t resource = 0;                  // row (engine / queue / kernels)
  c10::time_t start_ns = 0, end_ns = 0;  // wall clock (c10::getTime)
  uint64_t correlation = 0;              // 0: not linked to an op
  std::string kernel;
};

struct ActivityResource {
  int32_t id = 0;
  int32_t device = 0;
  std::string name;
};

class ActivityRecorder {
 public:
  static ActivityRecorder& get();
  bool active() const { return active_; }
  void start();
  void stop();
  /// Called after each kernel launch with the run's result (runtime lock held).
  void on_launch(const std::string& kernel, const device_model::RunResult& r);
  void push_correlation(uint64_t id);
  void pop_correlation();
  /// Moves out what was recorded.
  std::vector<DeviceActivity> take();
  std::vector<ActivityResource> resources() const;
  std::vector<int32_t> devices() const;

 private:
  int32_t resource_of(int32_t device, const std::string& row);
  bool active_ = false;
  std::unique_ptr<traces::MemoryTraceSink> sink_;
  std::vector<DeviceActivity> activities_;
  std::map<std::pair<int32_t, std::string>, int32_t> resources_;
};

}  // namespace neuronsim::backend
