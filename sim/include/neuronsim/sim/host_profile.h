#pragma once
// Host-side cost of the per-op path, per stage: a diagnostic behind NEURONSIM_HOST_PROFILE=1
// (read once). Stages nest; each accumulates its exclusive wall time (a nested stage pauses its
// parent), so the totals add up to the time spent inside the profiled code. Off, a scope costs
// one branch. Each layer registers the stages it owns (a HostStage constant named once, e.g. the
// device model's "validate", the backend's "dispatch"); read by `neuronsim._C._host_profile()`
// and bench/eager_overhead_bench.py --profile.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neuronsim::sim {

/// A named stage. Construct one per stage, once, where its layer defines it (a namespace-scope
/// constant); the same name gives the same stage.
class HostStage {
 public:
  static constexpr size_t kMax = 32;
  explicit HostStage(std::string_view name);
  uint8_t id() const { return id_; }

 private:
  uint8_t id_;
};

struct HostStageTotal {
  std::string name;
  uint64_t ns = 0, entries = 0;
};

class HostProfile {
 public:
  static bool enabled() { return enabled_; }
  /// Totals per registered stage since the last reset (this thread's stages; the backend runs
  /// ops on one thread).
  static std::vector<HostStageTotal> totals();
  static void reset();

 private:
  friend class HostStageScope;
  static const bool enabled_;
};

/// Times a stage for its lifetime (exclusive of stages nested inside it).
class HostStageScope {
 public:
  explicit HostStageScope(const HostStage& s) {
    if (HostProfile::enabled()) enter(s.id());
  }
  ~HostStageScope() {
    if (active_) leave();
  }
  HostStageScope(const HostStageScope&) = delete;
  HostStageScope& operator=(const HostStageScope&) = delete;

 private:
  void enter(uint8_t s);
  void leave();
  bool active_ = false;
  int8_t parent_ = -1;
};

}  // namespace neuronsim::sim
