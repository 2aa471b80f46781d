#pragma once
// Fast mode's host values for a compiled graph in one host call: the graph runs as plain CPU
// ATen ops on zero-copy CPU views of its device inputs (no per-node device dispatch, no device
// copy per intermediate; large ones live in device memory, HostAllocScope), then its device
// outputs become device tensors (in place, or copied when small) and the graph's single launch
// runs the fused programs for the time.
//
// A HostRun lives for one run of a graph. It maps each CPU storage it handed out or filled back
// to the device storage behind it, so an output that aliases an input (a weight's transposed
// view saved for the backward) stays a view of that input, outputs sharing a storage share one
// device storage, and the values the programs address find their device memory (values only
// the programs keep in HBM get device memory of their own for the launch).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace neuronsim::backend {

class HostRun {
 public:
  /// A CPU tensor on the same memory as neuron tensor `t` (same storage offset, sizes and
  /// strides); neuron tensors on one storage get views on one CPU storage. Throws c10::Error for
  /// a tensor with a lazy conjugate or negative bit.
  at::Tensor view(const at::Tensor& t);
  /// The device tensor for CPU tensor `t`: a view of the device storage `t`'s memory belongs to;
  /// for memory the host run allocated, that memory itself when it is device memory
  /// (HostAllocScope), else a new device storage holding a copy of it.
  at::Tensor to_device(const at::Tensor& t, c10::Device device);
  /// Device memory for a value only the programs address: the device storage its CPU memory
  /// maps to, else a new device tensor of its layout (fast mode: the programs only time it).
  at::Tensor program_value(const at::Tensor& t, c10::Device device);
  /// The device of the first neuron tensor view() saw.
  std::optional<c10::Device> device() const { return device_; }

 private:
  struct Entry {
    c10::Storage device;
    c10::Storage cpu;
  };
  at::Tensor alias(const Entry& e, const at::Tensor& t) const;
  /// A device storage on `s`'s memory when that is device memory a HostAllocScope handed out
  /// (no copy; it keeps `s` alive), else an empty storage.
  static c10::Storage adopt(const c10::Storage& s, c10::Device device);
  std::map<const void*, Entry> by_base_;  // CPU storage base -> device storage
  std::optional<c10::Device> device_;
};

/// While one is alive on a thread, the thread's large CPU allocations (64 KiB and up) come from
/// `device`'s memory when it is the current device: the host run's results are then already in
/// device memory, and HostRun::to_device wraps them with no copy. Otherwise (no device, another
/// device) they come from a cache of freed blocks (freed from any thread): a graph's host run
/// allocates the same intermediates at every step, and fresh pages for them cost page faults
/// (the device's caching allocator spares eager ops and device-memory host runs that). Blocks
/// freed outside a scope return to the cache too; it holds at most 1 GiB.
class HostAllocScope {
 public:
  explicit HostAllocScope(std::optional<c10::Device> device = std::nullopt);
  ~HostAllocScope();
  HostAllocScope(const HostAllocScope&) = delete;
  HostAllocScope& operator=(const HostAllocScope&) = delete;

 private:
  bool outer_device_memory_;
};

}  // namespace neuronsim::backend
