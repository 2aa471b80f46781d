// at::PrivateUse1HooksInterface for the neuron device (registered from the Python module's
// init), plus the pinned host allocator it hands out.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "accelerator/context.h"
#include "accelerator/generator.h"
#include "accelerator/hooks.h"

namespace neuronsim::backend {
namespace {

// "Pinned" host memory is ordinary host memory the runtime knows about: copies from it may be
// non-blocking, as from page-locked memory on a real device.
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nbytes ? std::aligned_alloc(64, (nbytes + 63) / 64 * 64) : nullptr;
    TORCH_CHECK(nbytes == 0 || p, "pinned host allocation of ", nbytes, " bytes failed");
    if (p) {
      std::lock_guard<std::mutex> lock(m_);
      live_.insert(p);
    }
    return {p, p, &deleter, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &deleter; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool is_pinned(const void* p) {
    std::lock_guard<std::mutex> lock(m_);
    return live_.count(const_cast<void*>(p)) > 0;
  }
  static void deleter(void* p);

 private:
  std::mutex m_;
  std::unordered_set<void*> live_;
};

PinnedHostAllocator g_pinned;

void PinnedHostAllocator::deleter(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned.m_);
    g_pinned.live_.erase(p);
  }
  std::free(p);
}

class NeuronHooks final : public at::PrivateUse1HooksInterface {
 public:
  void init() const override { rt(); }
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_noexcept() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return runtime::Runtime::initialized();
  }
  c10::DeviceIndex deviceCount() const override { return device_count_noexcept(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const auto old = current_device();
    if (d >= 0) set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= device_count_noexcept()) return current_device();
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  bool isPinnedPtr(const void* data) const override { return g_pinned.is_pinned(data); }
  at::Device getDeviceFromPtr(void* data) const override {
    const int dev = runtime::Runtime::initialized()
                        ? with_runtime([&](runtime::Runtime& r) { return r.device_of(data); })
                        : -1;
    TORCH_CHECK(dev >= 0, "pointer ", data, " is not neuron device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev));
  }
  // Storage.resize_ (FSDP2 frees and restores parameters this way).
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const size_t old_bytes = impl->nbytes();
    if (new_bytes == old_bytes) return;
    c10::Allocator* alloc = impl->allocator();
    TORCH_CHECK(alloc, "neuron storage has no allocator");
    c10::DeviceGuard guard(impl->device());
    c10::DataPtr fresh = alloc->allocate(new_bytes);
    if (old_bytes && new_bytes && impl->data()) {
      std::memcpy(fresh.get(), impl->data(), std::min(old_bytes, new_bytes));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

}  // namespace

void register_hooks() {
  static NeuronHooks hooks;
  static std::once_flag once;
  std::call_once(once, [] { at::RegisterPrivateUse1HooksInterface(&hooks); });
}

bool is_pinned(const c10::Storage& storage) {
  return g_pinned.is_pinned(storage.data());
}

}  // namespace neuronsim::backend
