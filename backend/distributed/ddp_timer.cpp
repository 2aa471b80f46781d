// DDP's per-iteration timer for neuron devices. DistributedDataParallel's logger asks the
// TimerRegistry for the device type of its module; without an entry it warns on every run ("Time
// stats are currently only collected for CPU and CUDA devices") and reports no compute or
// communication times. As CUDA's timer does with CUDA events, this one records device events on
// the current neuron stream, so the times in DDP's logging data are simulated device times.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <memory>
#include <optional>

namespace neuronsim::backend::distributed {
namespace {

constexpr int kEvents = 5;  // c10d::Timer::Event's values

class NeuronTimer : public c10d::Timer {
 public:
  explicit NeuronTimer(c10::Device device) : device_(device) {
    for (auto& e : events_) {
      e = std::make_unique<c10::Event>(c10::DeviceType::PrivateUse1,
                                       c10::EventFlag::BACKEND_DEFAULT);
    }
  }

  void record(Event event) override {
    Timer::record(event);  // the host timestamp, as every timer keeps
    const c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
    event_of(event).record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& a = event_of(start);
    c10::Event& b = event_of(end);
    if (!a.was_marked_for_recording() || !b.was_marked_for_recording()) return std::nullopt;
    a.synchronize();
    b.synchronize();
    const double ms = a.elapsedTime(b);
    if (ms < 0) return std::nullopt;  // recorded out of order in this iteration
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  c10::Event& event_of(Event e) { return *events_[static_cast<size_t>(e)]; }

  c10::Device device_;
  std::array<std::unique_ptr<c10::Event>, kEvents> events_;
};

}  // namespace
}  // namespace neuronsim::backend::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::DeviceType::PrivateUse1,
                         neuronsim::backend::distributed::NeuronTimer)
}  // namespace c10d
