// c10::impl::DeviceGuardImplInterface for the neuron device: current device and stream, and
// events whose timestamps are simulated time (Event.elapsed_time reports simulated ms).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <vector>

#include "accelerator/context.h"

namespace neuronsim::backend {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

class NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "expected a neuron device, got ", d);
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      if (d.index() >= 0) set_current_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    const c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    const int64_t id = with_runtime([&](runtime::Runtime& r) { return r.new_stream(idx); });
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, idx), id);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    // A small pool per device, handed out round robin (as CUDA's stream pool).
    static std::vector<std::vector<c10::StreamId>> pools;
    static std::vector<size_t> next;
    const c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
    if (pools.size() <= static_cast<size_t>(idx)) {
      pools.resize(idx + 1);
      next.resize(idx + 1, 0);
    }
    auto& pool = pools[idx];
    if (pool.size() < 4) {
      pool.push_back(getNewStream(c10::Device(kType, idx), 0).id());
      return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, idx), pool.back());
    }
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, idx),
                       pool[next[idx]++ % pool.size()]);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count_noexcept(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()));
    auto* e = static_cast<runtime::Event*>(*event);
    if (!e) {
      e = new runtime::Event();
      *event = e;
    }
    if (const sim::SimTime* t = ScopedEventTime::current()) {
      e->time = *t;
      e->recorded = true;
      return;
    }
    with_runtime([&](runtime::Runtime& r) {
      r.record(*e, static_cast<uint32_t>(stream.device_index()), stream.id());
      return 0;
    });
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    with_runtime([&](runtime::Runtime& r) {
      r.wait_event(*static_cast<runtime::Event*>(event),
                   static_cast<uint32_t>(stream.device_index()), stream.id());
      return 0;
    });
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    return with_runtime(
        [&](runtime::Runtime& r) { return r.query(*static_cast<runtime::Event*>(event)); });
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<runtime::Event*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    with_runtime([&](runtime::Runtime& r) {
      r.synchronize_event(*static_cast<runtime::Event*>(event));
      return 0;
    });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    const auto* a = static_cast<runtime::Event*>(start);
    const auto* b = static_cast<runtime::Event*>(end);
    TORCH_CHECK(a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time.");
    return (static_cast<double>(b->time.ps) - static_cast<double>(a->time.ps)) * 1e-9;
  }

  bool queryStream(const c10::Stream& s) const override {
    return with_runtime([&](runtime::Runtime& r) {
      return r.query_stream(static_cast<uint32_t>(s.device_index()), s.id());
    });
  }
  void synchronizeStream(const c10::Stream& s) const override {
    with_runtime([&](runtime::Runtime& r) {
      r.synchronize_stream(static_cast<uint32_t>(s.device_index()), s.id());
      return 0;
    });
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    with_runtime([&](runtime::Runtime& r) {
      r.synchronize();
      return 0;
    });
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {
    // Work completes in launch order on the simulated clock, so a block is never reused while a
    // kernel still reads it.
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace neuronsim::backend
