#include "neuronsim/runtime/collective_timeline.h"

#include <algorithm>

#include <fmt/format.h>

namespace neuronsim::runtime {

CollectiveRecord CollectiveTimeline::place(uint32_t core, CollectiveRecord r,
                                           const std::vector<sim::SimTime>& arrivals,
                                           sim::SimTime cost, sim::TraceSink& sink) {
  sim::SimTime& free = group_free_[r.group];
  sim::SimTime last;
  for (sim::SimTime a : arrivals) last = sim::max(last, a);
  r.ready = sim::max(r.arrival, free);
  r.start = sim::max(last, free);
  r.end = r.start + cost;
  free = r.end;
  record(core, r, sink);
  return r;
}

CollectiveRecord CollectiveTimeline::place_p2p(uint32_t core, CollectiveRecord r,
                                               sim::SimTime peer_arrival, sim::SimTime cost,
                                               sim::TraceSink& sink) {
  r.ready = r.arrival;
  r.start = sim::max(r.arrival, peer_arrival);
  r.end = r.start + cost;
  record(core, r, sink);
  return r;
}

void CollectiveTimeline::record(uint32_t core, const CollectiveRecord& r, sim::TraceSink& sink) {
  latest_end_ = sim::max(latest_end_, r.end);
  CollectiveTotals& t = totals_[core];
  ++t.count;
  t.busy = t.busy + (r.end - r.start);
  t.waited = t.waited + r.waited();
  if (account_) {
    account_->add(traces::TimePart::kCollectiveWait, r.ready, r.start);
    account_->add(traces::TimePart::kCollectives, r.start, r.end);
  }
  if (!sink.enabled()) return;
  if (tracks_sink_ != &sink) tracks_.clear(), tracks_sink_ = &sink;
  auto [it, fresh] = tracks_.emplace(std::make_pair(core, r.group), 0);
  if (fresh) {
    it->second = sink.add_track({fmt::format("nc{}", core), fmt::format("Collectives {}", r.group),
                                 sim::TrackKind::kSlices, 95});
  }
  nlohmann::json args = {
      {"group", r.group}, {"algorithm", r.algorithm},     {"bytes", r.bytes},
      {"ranks", r.ranks}, {"arrival_ns", r.arrival.ns()}, {"wait_ns", r.waited().ns()}};
  // The wait for the other ranks comes first on the group's row, then the collective itself.
  if (r.start > r.ready) {
    sink.slice(it->second, "wait " + r.name, "collective_wait", r.ready, r.start, args);
  }
  sink.slice(it->second, r.name, "collective", r.start, sim::max(r.end, r.start + sim::SimTime{1}),
             std::move(args));
}

}  // namespace neuronsim::runtime
