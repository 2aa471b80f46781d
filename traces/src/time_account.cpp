#include "neuronsim/traces/time_account.h"

#include <algorithm>

namespace neuronsim::traces {
namespace {

struct PartNames {
  std::string_view name, key, category;
};
// In TimePart order.
constexpr std::array<PartNames, kTimePartCount> kParts = {{
    {"kernels", "kernels", "kernel"},
    {"host-device copies", "host_copies", "host_dma"},
    {"collective communication", "collectives", "collective"},
    {"waiting for other ranks", "collective_wait", "collective_wait"},
    {"CPU fallback", "cpu_fallback", "fallback"},
    {"kernel launch overhead", "launch", "launch"},
    {"idle", "idle", ""},
}};

// Picoseconds as nanoseconds, divided (not scaled by 1e-3) so the value is the exact quotient.
double ns_of(sim::SimTime t) {
  return static_cast<double>(t.ps) / 1000.0;
}

}  // namespace

std::string_view time_part_name(TimePart p) {
  return kParts[static_cast<size_t>(p)].name;
}

std::string_view time_part_key(TimePart p) {
  return kParts[static_cast<size_t>(p)].key;
}

std::optional<TimePart> part_of_category(std::string_view category) {
  for (size_t i = 0; i < kParts.size(); ++i) {
    if (!kParts[i].category.empty() && kParts[i].category == category) {
      return static_cast<TimePart>(i);
    }
  }
  return std::nullopt;
}

TimeAccumulator::TimeAccumulator(sim::SimTime begin) : frontier_(begin.ps), begin_(begin) {}

void TimeAccumulator::add(TimePart part, sim::SimTime begin, sim::SimTime end) {
  if (part == TimePart::kIdle) return;  // idle is what no part claims
  ++count_[static_cast<size_t>(part)];
  const uint64_t b = std::max(begin.ps, frontier_);
  if (end.ps > b) pending_.push_back({b, end.ps, part});
}

void TimeAccumulator::settle(sim::SimTime t) {
  settle(t, nullptr);
}

void TimeAccumulator::settle(sim::SimTime t, std::vector<OwnedSpan>* spans) {
  if (t.ps <= frontier_) return;
  // The boundaries inside [frontier, t): each part's intervals open (+1) and close (-1).
  struct Edge {
    uint64_t at;
    int delta;
    TimePart part;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * pending_.size());
  for (const Interval& iv : pending_) {
    if (iv.begin >= t.ps) continue;
    edges.push_back({iv.begin, +1, iv.part});
    edges.push_back({std::min(iv.end, t.ps), -1, iv.part});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<int, kTimePartCount> open{};
  uint64_t at = frontier_;
  for (const Edge& e : edges) {
    if (e.at > at) {
      const uint64_t len = e.at - at;
      bool owned = false;
      for (size_t p = 0; p < kTimePartCount; ++p) {
        if (open[p] == 0) continue;
        total_[p] += len;
        if (owned) continue;
        owned = true;
        exposed_[p] += len;
        if (!spans) continue;
        const auto part = static_cast<TimePart>(p);
        if (!spans->empty() && spans->back().part == part && spans->back().end.ps == at) {
          spans->back().end = {e.at};
        } else {
          spans->push_back({{at}, {e.at}, part});
        }
      }
      at = e.at;
    }
    open[static_cast<size_t>(e.part)] += e.delta;
  }
  // What runs past t stays, from t on.
  std::vector<Interval> rest;
  for (Interval iv : pending_) {
    if (iv.end <= t.ps) continue;
    iv.begin = std::max(iv.begin, t.ps);
    rest.push_back(iv);
  }
  pending_ = std::move(rest);
  frontier_ = t.ps;
}

TimeAccount TimeAccumulator::account(sim::SimTime end, std::vector<OwnedSpan>* spans) const {
  TimeAccumulator copy = *this;
  const sim::SimTime stop = sim::max(end, begin_);
  copy.settle(stop, spans);
  TimeAccount a;
  a.begin = begin_;
  a.end = stop;
  uint64_t owned = 0;
  for (size_t p = 0; p < kTimePartCount; ++p) {
    a.exposed[p] = {copy.exposed_[p]};
    a.total[p] = {copy.total_[p]};
    a.count[p] = copy.count_[p];
    owned += copy.exposed_[p];
  }
  const size_t idle = static_cast<size_t>(TimePart::kIdle);
  const uint64_t window = stop.ps - begin_.ps;
  a.exposed[idle] = a.total[idle] = {window > owned ? window - owned : 0};
  return a;
}

nlohmann::json TimeAccount::to_json() const {
  nlohmann::json parts = nlohmann::json::array();
  const double w = static_cast<double>(window().ps);
  for (size_t p = 0; p < kTimePartCount; ++p) {
    const auto part = static_cast<TimePart>(p);
    parts.push_back({{"part", time_part_key(part)},
                     {"name", time_part_name(part)},
                     {"ns", ns_of(exposed[p])},
                     {"total_ns", ns_of(total[p])},
                     {"count", count[p]},
                     {"share", w > 0 ? static_cast<double>(exposed[p].ps) / w : 0.0}});
  }
  return {{"begin_ns", ns_of(begin)},
          {"end_ns", ns_of(end)},
          {"window_ns", ns_of(window())},
          {"parts", std::move(parts)}};
}

Limit limit_of(const TimeAccount& a,
               const std::vector<std::pair<std::string, sim::SimTime>>& engines) {
  Limit l;
  const double window = static_cast<double>(a.window().ps);
  if (window <= 0) return l;
  for (const auto& [label, busy] : engines) {
    const double share = static_cast<double>(busy.ps) / window;
    if (share > l.share) l = {label, share, true};
  }
  for (size_t p = 0; p < kTimePartCount; ++p) {
    const auto part = static_cast<TimePart>(p);
    if (part == TimePart::kKernels || part == TimePart::kIdle) continue;
    const double share = static_cast<double>(a.exposed[p].ps) / window;
    if (share > l.share) l = {std::string(time_part_name(part)), share, false};
  }
  return l;
}

nlohmann::json to_json(const Limit& l) {
  return {{"name", l.name}, {"share", l.share}, {"engine", l.engine}};
}

}  // namespace neuronsim::traces
