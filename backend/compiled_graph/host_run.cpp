#include "compiled_graph/host_run.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "accelerator/context.h"
#include "aten/device_tensor.h"

namespace neuronsim::backend {
namespace {

thread_local int t_host_alloc_depth = 0;
thread_local bool t_device_memory = false;  // the innermost scope allocates device memory

class HostBlockCache final : public c10::Allocator {
 public:
  static constexpr size_t kMinBytes = size_t{64} << 10;
  static constexpr size_t kGranule = size_t{16} << 10;
  static constexpr size_t kMaxCached = size_t{1} << 30;

  explicit HostBlockCache(c10::Allocator* base) : base_(base) { instance_ = this; }

  // Data pointers are simple (context == data), so raw_allocate works too; the deleter finds
  // a block's size in live_, and frees anything else as the default CPU allocator does.
  c10::DataPtr allocate(size_t n) override {
    if (t_host_alloc_depth == 0 || n < kMinBytes) return base_->allocate(n);
    if (t_device_memory) {
      // The device allocator's pointers are their own contexts (device_allocator.cpp). When
      // device memory runs out, host memory serves (the results are then copied, as before).
      void* p = nullptr;
      try {
        p = c10::GetAllocator(c10::DeviceType::PrivateUse1)->allocate(n).release_context();
      } catch (const c10::OutOfMemoryError&) {
        p = nullptr;
      }
      if (p != nullptr) {
        std::lock_guard<std::mutex> lock(mutex_);
        live_[p] = Block{n, true};
        return {p, p, &release, c10::Device(c10::kCPU)};
      }
    }
    const size_t size = (n + kGranule - 1) / kGranule * kGranule;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
      }
    }
    if (p == nullptr) p = c10::alloc_cpu(size);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[p] = Block{size, false};
    }
    return {p, p, &release, c10::Device(c10::kCPU)};
  }

  /// Whether `p` is device memory this cache handed out as CPU memory.
  static bool device_memory(const void* p) {
    if (instance_ == nullptr) return false;
    std::lock_guard<std::mutex> lock(instance_->mutex_);
    auto it = instance_->live_.find(const_cast<void*>(p));
    return it != instance_->live_.end() && it->second.device;
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Block {
    size_t size;
    bool device;
  };

  static void release(void* p) {
    HostBlockCache& c = *instance_;
    bool device = false;
    {
      std::lock_guard<std::mutex> lock(c.mutex_);
      auto it = c.live_.find(p);
      if (it != c.live_.end()) {
        const Block b = it->second;
        c.live_.erase(it);
        device = b.device;
        if (!device && c.cached_ + b.size <= kMaxCached) {
          c.free_[b.size].push_back(p);
          c.cached_ += b.size;
          return;
        }
      }
    }
    if (device) {
      free_device_memory(p);  // outside the cache's lock: it takes the runtime's
    } else {
      c10::free_cpu(p);
    }
  }

  static inline HostBlockCache* instance_ = nullptr;
  c10::Allocator* base_;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, Block> live_;
  size_t cached_ = 0;
};

void install_host_block_cache() {
  static const bool installed = [] {
    // Never destroyed: blocks may be freed during static destruction.
    static auto* cache = new HostBlockCache(c10::GetCPUAllocator());
    c10::SetCPUAllocator(cache, /*priority=*/1);
    return true;
  }();
  (void)installed;
}

// A tensor on `storage` with `like`'s dtype, sizes, strides and offset, built directly: at::empty
// and set_ dispatch twice per tensor, and a graph's run makes one per input, output and value.
at::Tensor on_storage(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                          c10::DispatchKeySet(key), like.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                 like.storage_offset());
  return t;
}

// Device memory has a CPU storage here; its device tensors keep that storage alive.
void drop_storage_ref(void* impl) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(impl));
}

}  // namespace

HostAllocScope::HostAllocScope(std::optional<c10::Device> device)
    : outer_device_memory_(t_device_memory) {
  install_host_block_cache();
  ++t_host_alloc_depth;
  // The device allocator serves the current device.
  t_device_memory = device && device->is_privateuseone() && device->index() == current_device();
}

HostAllocScope::~HostAllocScope() {
  --t_host_alloc_depth;
  t_device_memory = outer_device_memory_;
}

at::Tensor HostRun::alias(const Entry& e, const at::Tensor& t) const {
  return on_storage(e.device, c10::DispatchKey::PrivateUse1, t);
}

at::Tensor HostRun::view(const at::Tensor& t) {
  TORCH_CHECK(!t.is_conj() && !t.is_neg(), "neuronsim: a compiled graph's host run got ",
              "a tensor with a lazy conjugate/negative bit");
  if (!device_) device_ = t.device();
  const c10::Storage& s = t.storage();
  void* base = s.mutable_data();
  auto it = by_base_.find(base);
  if (it == by_base_.end() || base == nullptr) {
    c10::Storage cpu(c10::Storage::use_byte_size_t(), s.nbytes(),
                     c10::DataPtr(base, c10::Device(c10::kCPU)), nullptr, false);
    Entry e{s, cpu};
    if (base == nullptr) return on_storage(std::move(cpu), c10::DispatchKey::CPU, t);
    it = by_base_.emplace(base, std::move(e)).first;
  }
  return on_storage(it->second.cpu, c10::DispatchKey::CPU, t);
}

at::Tensor HostRun::to_device(const at::Tensor& t, c10::Device device) {
  if (t.device() == device) return t;
  const c10::Storage& s = t.storage();
  const void* base = s.data();
  if (base == nullptr || s.nbytes() == 0) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
  }
  auto it = by_base_.find(base);
  if (it == by_base_.end()) {
    c10::Storage dev = adopt(s, device);
    if (!dev) {
      at::Tensor bytes = at::empty({static_cast<int64_t>(s.nbytes())},
                                   at::TensorOptions().dtype(at::kByte).device(device));
      std::memcpy(bytes.data_ptr(), base, s.nbytes());
      dev = bytes.storage();
    }
    it = by_base_.emplace(base, Entry{std::move(dev), s}).first;
  }
  return alias(it->second, t);
}

c10::Storage HostRun::adopt(const c10::Storage& s, c10::Device device) {
  void* base = const_cast<void*>(s.data());
  if (device.index() != current_device() || !HostBlockCache::device_memory(base)) return {};
  c10::StorageImpl* impl = s.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  return c10::Storage(c10::Storage::use_byte_size_t(), s.nbytes(),
                      c10::DataPtr(base, impl, &drop_storage_ref, device),
                      c10::GetAllocator(c10::DeviceType::PrivateUse1), /*resizable=*/true);
}

at::Tensor HostRun::program_value(const at::Tensor& t, c10::Device device) {
  if (t.device() == device) return t;
  const void* base = t.storage().data();
  auto it = by_base_.find(base);
  if (base != nullptr && it != by_base_.end()) return alias(it->second, t);
  if (base != nullptr) {
    if (c10::Storage dev = adopt(t.storage(), device)) {
      return alias(by_base_.emplace(base, Entry{std::move(dev), t.storage()}).first->second, t);
    }
  }
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
}

}  // namespace neuronsim::backend
