// The neuron device allocator: a c10::DeviceAllocator (so torch.accelerator.memory_* work) over
// the runtime's caching allocator in simulated HBM. Pointers are host-addressable.
#include <c10/core/CachingDeviceAllocator.h>

#include <cstring>

#include "accelerator/context.h"
#include "host_stages.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {
namespace {

void copy_stats(const runtime::StatArray& in, c10::CachingAllocator::StatArray& out) {
  for (size_t i = 0; i < 3; ++i) {
    out[i].current = in[i].current;
    out[i].peak = in[i].peak;
    out[i].allocated = in[i].allocated;
    out[i].freed = in[i].freed;
  }
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex dev = current_device();
    const c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (nbytes == 0) return {nullptr, nullptr, &free_device_memory, device};
    sim::HostStageScope stage(stages::kAlloc);
    void* p = with_runtime(
        [&](runtime::Runtime& r) { return r.malloc(static_cast<uint32_t>(dev), nbytes); });
    return {p, p, &free_device_memory, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_memory; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool initialized() override { return runtime::Runtime::initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!initialized()) return;
    with_runtime([](runtime::Runtime& r) {
      for (uint32_t d = 0; d < r.device_count(); ++d) r.allocator(d).empty_cache();
      return 0;
    });
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {
    // Kernels complete in launch order on the simulated clock; nothing to defer.
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    c10::CachingDeviceAllocator::DeviceStats out;
    if (!initialized()) return out;
    with_runtime([&](runtime::Runtime& r) {
      const auto& s = r.allocator(static_cast<uint32_t>(device)).stats();
      copy_stats(s.allocation, out.allocation);
      copy_stats(s.segment, out.segment);
      copy_stats(s.active, out.active);
      copy_stats(s.inactive_split, out.inactive_split);
      copy_stats(s.allocated_bytes, out.allocated_bytes);
      copy_stats(s.reserved_bytes, out.reserved_bytes);
      copy_stats(s.active_bytes, out.active_bytes);
      copy_stats(s.inactive_split_bytes, out.inactive_split_bytes);
      copy_stats(s.requested_bytes, out.requested_bytes);
      out.num_alloc_retries = s.num_alloc_retries;
      out.num_ooms = s.num_ooms;
      out.num_device_alloc = s.num_device_alloc;
      out.num_device_free = s.num_device_free;
      out.max_split_size = -1;  // as memory_stats(): blocks of any size may be split
      return 0;
    });
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    with_runtime([&](runtime::Runtime& r) {
      r.allocator(static_cast<uint32_t>(device)).reset_accumulated_stats();
      return 0;
    });
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    with_runtime([&](runtime::Runtime& r) {
      r.allocator(static_cast<uint32_t>(device)).reset_peak_stats();
      return 0;
    });
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return with_runtime([&](runtime::Runtime& r) {
      const auto [f, t] = r.allocator(static_cast<uint32_t>(device)).mem_info();
      return std::pair<size_t, size_t>(f, t);
    });
  }
};

NeuronDeviceAllocator g_allocator;

}  // namespace

c10::DeviceAllocator* device_allocator() {
  return &g_allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace neuronsim::backend
