// The legacy profiler stubs (torch.autograd.profiler.profile(use_device="neuron",
// use_kineto=False)): device events are points on the simulated device clock, so the elapsed
// time between an op's start and end events is the simulated device time it took.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

#include "accelerator/context.h"

namespace neuronsim::backend {
namespace {

struct DeviceEvent {
  double device_ns;
};

class NeuronStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device) *device = current_device();
    const double t = with_runtime([](runtime::Runtime& r) { return r.device_time().ns(); });
    *event = std::make_shared<DeviceEvent>(DeviceEvent{t});
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    const auto* ea = static_cast<const DeviceEvent*>(a->get());
    const auto* eb = static_cast<const DeviceEvent*>(b->get());
    return static_cast<float>((eb->device_ns - ea->device_ns) / 1000.0);  // microseconds
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < device_count_noexcept(); ++d) op(d);
  }
  void synchronize() const override {
    with_runtime([](runtime::Runtime& r) {
      r.synchronize();
      return 0;
    });
  }
};

struct Register {
  Register() {
    static NeuronStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register;

}  // namespace
}  // namespace neuronsim::backend
