#include "neuronsim/sim/host_profile.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace neuronsim::sim {
namespace {

bool read_enabled() {
  const char* v = std::getenv("NEURONSIM_HOST_PROFILE");
  return v && std::strcmp(v, "1") == 0;
}

// The registered stages' names, by id (function-local: stages register during static
// initialisation of every layer).
std::vector<std::string>& stage_names() {
  static std::vector<std::string> names;
  return names;
}
std::mutex& names_mutex() {
  static std::mutex m;
  return m;
}

struct State {
  std::array<uint64_t, HostStage::kMax> ns{}, entries{};
  int8_t current = -1;  // the innermost open stage
  std::chrono::steady_clock::time_point mark;
};
thread_local State t_state;

// Charges the time since the last mark to the open stage.
void charge(State& s, std::chrono::steady_clock::time_point now) {
  if (s.current >= 0) {
    s.ns[static_cast<size_t>(s.current)] += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.mark).count());
  }
  s.mark = now;
}

}  // namespace

const bool HostProfile::enabled_ = read_enabled();

HostStage::HostStage(std::string_view name) {
  std::lock_guard<std::mutex> lock(names_mutex());
  std::vector<std::string>& names = stage_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      id_ = static_cast<uint8_t>(i);
      return;
    }
  }
  if (names.size() >= kMax) throw std::length_error("too many host profile stages");
  id_ = static_cast<uint8_t>(names.size());
  names.emplace_back(name);
}

std::vector<HostStageTotal> HostProfile::totals() {
  std::lock_guard<std::mutex> lock(names_mutex());
  std::vector<HostStageTotal> out;
  const std::vector<std::string>& names = stage_names();
  for (size_t i = 0; i < names.size(); ++i) {
    out.push_back({names[i], t_state.ns[i], t_state.entries[i]});
  }
  return out;
}

void HostProfile::reset() {
  t_state.ns = {};
  t_state.entries = {};
}

void HostStageScope::enter(uint8_t s) {
  State& st = t_state;
  charge(st, std::chrono::steady_clock::now());
  parent_ = st.current;
  st.current = static_cast<int8_t>(s);
  ++st.entries[s];
  active_ = true;
}

void HostStageScope::leave() {
  State& st = t_state;
  charge(st, std::chrono::steady_clock::now());
  st.current = parent_;
}

}  // namespace neuronsim::sim
