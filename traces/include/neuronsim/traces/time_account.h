#pragma once
// Where the simulated time went: a window of simulated time split into parts that add up to it.
//
// Every instant of the window belongs to exactly one part: the first of the list below that was
// active then (work that runs under a kernel is hidden by it, so a part's time is what it cost
// the run; its total, hidden time included, is kept beside it):
//   kernels                  a kernel (program) runs on a core of this process
//   host-device copies       a transfer over the host link (Host DMA)
//   collective communication a collective of this rank runs
//   waiting for other ranks  this rank reached a collective and waits for the last rank
//   CPU fallback             the host runs an op's CPU kernel (host.cpu_fallback_overhead_ns)
//   kernel launch overhead   the host launches a kernel or issues a collective
//                            (host.kernel_launch_overhead_ns)
//   idle                     none of these (before the first op, or host time nothing above
//                            accounts for)
// The runtime feeds the records as it makes them (neuronsim run's closing lines, with or without
// a trace); a trace summary feeds the same records read back from the trace (slices by category:
// part_of_category), so both split a run alike.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/units.h"

namespace neuronsim::traces {

enum class TimePart : uint8_t {
  kKernels,
  kHostCopies,
  kCollectives,
  kCollectiveWait,
  kCpuFallback,
  kLaunch,
  kIdle,
};
inline constexpr size_t kTimePartCount = 7;

/// "kernels", "host-device copies", ... (as reports print them).
std::string_view time_part_name(TimePart p);
/// "kernels", "host_copies", ... (JSON keys).
std::string_view time_part_key(TimePart p);
/// The part a trace slice of this category records ("kernel", "host_dma", "collective",
/// "collective_wait", "fallback", "launch"); none for every other category.
std::optional<TimePart> part_of_category(std::string_view category);

struct TimeAccount {
  sim::SimTime begin, end;
  /// Per part: the time it owns (the parts add up to end - begin) and its own total, hidden
  /// time included (the union of its intervals inside the window).
  std::array<sim::SimTime, kTimePartCount> exposed{}, total{};
  /// Per part: how many intervals were recorded (launches, copies, collectives, ...).
  std::array<uint64_t, kTimePartCount> count{};

  sim::SimTime window() const { return end - begin; }
  sim::SimTime of(TimePart p) const { return exposed[static_cast<size_t>(p)]; }
  /// {"window_ns", "parts": [{"part", "name", "ns", "total_ns", "count", "share"}, ...]}.
  nlohmann::json to_json() const;
};

/// What dominates a window: the busiest engine (its busy time over the window) or a part other
/// than kernels and idle time, whichever takes the larger share. An engine wins ties.
struct Limit {
  std::string name;  // "nc0 VectorE", "kernel launch overhead"
  double share = 0;
  bool engine = false;
};
/// `engines`: label ("nc0 VectorE", "nc0 DMA (all queues)") and busy time inside the window.
Limit limit_of(const TimeAccount& a,
               const std::vector<std::pair<std::string, sim::SimTime>>& engines);
/// {"name", "share", "engine"}.
nlohmann::json to_json(const Limit& l);

/// A stretch of the window and the part that owns it.
struct OwnedSpan {
  sim::SimTime begin, end;
  TimePart part;
};

/// Builds a TimeAccount from intervals given in any order. Memory stays bounded by the work in
/// flight: settle(t) attributes everything before t, after which no interval may begin before t
/// (earlier parts of one are cut off).
class TimeAccumulator {
 public:
  explicit TimeAccumulator(sim::SimTime begin = {});
  void add(TimePart part, sim::SimTime begin, sim::SimTime end);
  void settle(sim::SimTime t);
  /// Intervals waiting to be settled.
  size_t pending() const { return pending_.size(); }
  /// The account of [begin, end): this accumulator is not changed. With `spans`, also the
  /// stretches each part owns from the last settle point on (idle ones left out), in order.
  TimeAccount account(sim::SimTime end, std::vector<OwnedSpan>* spans = nullptr) const;

 private:
  struct Interval {
    uint64_t begin, end;
    TimePart part;
  };
  void settle(sim::SimTime t, std::vector<OwnedSpan>* spans);
  uint64_t frontier_;
  sim::SimTime begin_;
  std::vector<Interval> pending_;
  std::array<uint64_t, kTimePartCount> exposed_{}, total_{}, count_{};
};

}  // namespace neuronsim::traces
