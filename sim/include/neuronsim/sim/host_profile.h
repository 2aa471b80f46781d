#pragma once
// Host-side cost of the per-op path, per stage: a diagnostic behind NEURONSIM_HOST_PROFILE=1
// (read once). Stages nest; each accumulates its exclusive wall time (a nested stage pauses its
// parent), so the totals add up to the time spent inside the backend. Off, a scope costs one
// branch. Read by `neuronsim._C._host_profile()` and bench/eager_overhead_bench.py --profile.
#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace neuronsim::sim {

enum class HostStage : uint8_t {
  kDispatch,    // the native kernel's own work: argument checks, unpacking, CPU views
  kHostValues,  // the CPU kernel that computes the values (fast mode)
  kBuild,       // building the op's programs (or finding them in the program cache)
  kValidate,    // validating a program before it runs
  kLaunch,      // the runtime's launch and the SystemC run of the program
  kTrace,       // recording the op, launch and kernel into an active trace
  kOpTracking,  // native / fallback op counts
  kFallback,    // the CPU fallback (copies through the simulated DMA and the CPU kernel)
  kAlloc,       // device memory: the caching allocator's allocate and free
  kObserver,    // the op-tracking RecordFunction observer's enter and exit callbacks
  kCount
};
std::string_view host_stage_name(HostStage s);

struct HostStageTotals {
  std::array<uint64_t, static_cast<size_t>(HostStage::kCount)> ns{};
  std::array<uint64_t, static_cast<size_t>(HostStage::kCount)> entries{};
};

class HostProfile {
 public:
  static bool enabled() { return enabled_; }
  /// Totals since the last reset (this thread's stages; the backend runs ops on one thread).
  static HostStageTotals totals();
  static void reset();

 private:
  friend class HostStageScope;
  static const bool enabled_;
};

/// Times a stage for its lifetime (exclusive of stages nested inside it).
class HostStageScope {
 public:
  explicit HostStageScope(HostStage s) {
    if (HostProfile::enabled()) enter(s);
  }
  ~HostStageScope() {
    if (active_) leave();
  }
  HostStageScope(const HostStageScope&) = delete;
  HostStageScope& operator=(const HostStageScope&) = delete;

 private:
  void enter(HostStage s);
  void leave();
  bool active_ = false;
  int8_t parent_ = -1;
};

}  // namespace neuronsim::sim
