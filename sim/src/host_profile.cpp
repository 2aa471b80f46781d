#include "neuronsim/sim/host_profile.h"

#include <cstdlib>
#include <cstring>

namespace neuronsim::sim {
namespace {

bool read_enabled() {
  const char* v = std::getenv("NEURONSIM_HOST_PROFILE");
  return v && std::strcmp(v, "1") == 0;
}

struct State {
  HostStageTotals totals;
  int8_t current = -1;  // the innermost open stage
  std::chrono::steady_clock::time_point mark;
};
thread_local State t_state;

// Charges the time since the last mark to the open stage.
void charge(State& s, std::chrono::steady_clock::time_point now) {
  if (s.current >= 0) {
    s.totals.ns[static_cast<size_t>(s.current)] += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.mark).count());
  }
  s.mark = now;
}

}  // namespace

const bool HostProfile::enabled_ = read_enabled();

std::string_view host_stage_name(HostStage s) {
  switch (s) {
    case HostStage::kDispatch:
      return "dispatch";
    case HostStage::kHostValues:
      return "host_values";
    case HostStage::kBuild:
      return "build";
    case HostStage::kValidate:
      return "validate";
    case HostStage::kLaunch:
      return "launch";
    case HostStage::kTrace:
      return "trace";
    case HostStage::kOpTracking:
      return "op_tracking";
    case HostStage::kFallback:
      return "fallback";
    case HostStage::kAlloc:
      return "alloc";
    case HostStage::kObserver:
      return "observer";
    case HostStage::kCount:
      break;
  }
  return "?";
}

HostStageTotals HostProfile::totals() {
  return t_state.totals;
}

void HostProfile::reset() {
  t_state.totals = {};
}

void HostStageScope::enter(HostStage s) {
  State& st = t_state;
  charge(st, std::chrono::steady_clock::now());
  parent_ = st.current;
  st.current = static_cast<int8_t>(s);
  ++st.totals.entries[static_cast<size_t>(s)];
  active_ = true;
}

void HostStageScope::leave() {
  State& st = t_state;
  charge(st, std::chrono::steady_clock::now());
  st.current = parent_;
}

}  // namespace neuronsim::sim
