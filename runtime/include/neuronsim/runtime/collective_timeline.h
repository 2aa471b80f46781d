#pragma once
// Collectives on this process's device timeline (one rank of a distributed job). A collective
// runs on its process group's collective stream, one after another as a communicator's do; it
// starts when the last rank of the group has arrived, so a rank that arrives early waits for the
// others, and ends after the time the collective model gives it. Every rank computes the same
// start and end from the same inputs (all ranks' arrivals, the group's previous end, the cost),
// so the clocks of the ranks meet at each collective. Torch-free.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/sim/units.h"
#include "neuronsim/traces/time_account.h"

namespace neuronsim::runtime {

/// One collective as this rank ran it.
struct CollectiveRecord {
  std::string name;       // "all_reduce"
  std::string group;      // the process group
  std::string algorithm;  // "ring", "hierarchical ring", ...
  uint64_t bytes = 0;     // nccl-tests size
  uint32_t ranks = 0;
  sim::SimTime arrival;  // this rank reached the collective
  sim::SimTime ready;    // ... and its group's previous collective had ended
  sim::SimTime start;    // the last rank was ready
  sim::SimTime end;
  sim::SimTime waited() const { return start - ready; }
};

/// Per-core totals, for summaries.
struct CollectiveTotals {
  uint64_t count = 0;
  sim::SimTime busy;    // sum of collective durations
  sim::SimTime waited;  // sum of waits for other ranks
};

class CollectiveTimeline {
 public:
  /// Places a collective of `group`: `arrivals` holds every rank's arrival (this rank's
  /// included), `cost` the collective's duration. Fills ready/start/end of `r` (its name,
  /// algorithm, bytes and ranks are the caller's), records it on `core`'s timeline and in
  /// `sink`, and returns it.
  CollectiveRecord place(uint32_t core, CollectiveRecord r,
                         const std::vector<sim::SimTime>& arrivals, sim::SimTime cost,
                         sim::TraceSink& sink);
  /// A point-to-point transfer: it starts at the later of `arrival` and `peer_arrival` (the
  /// sender's, on the receiver; the sender does not wait for the receiver) and does not queue
  /// behind the group's collectives.
  CollectiveRecord place_p2p(uint32_t core, CollectiveRecord r, sim::SimTime peer_arrival,
                             sim::SimTime cost, sim::TraceSink& sink);

  /// When the last collective placed so far ends.
  sim::SimTime latest_end() const { return latest_end_; }
  const std::map<uint32_t, CollectiveTotals>& totals() const { return totals_; }
  /// Where the collectives and the waits for other ranks are also recorded (the runtime's
  /// account of the run), or null.
  void set_account(traces::TimeAccumulator* account) { account_ = account; }

 private:
  void record(uint32_t core, const CollectiveRecord& r, sim::TraceSink& sink);

  std::map<std::string, sim::SimTime> group_free_;
  std::map<uint32_t, CollectiveTotals> totals_;
  std::map<std::pair<uint32_t, std::string>, sim::TrackId> tracks_;
  const sim::TraceSink* tracks_sink_ = nullptr;  // the sink `tracks_` belong to
  sim::SimTime latest_end_;
  traces::TimeAccumulator* account_ = nullptr;
};

}  // namespace neuronsim::runtime
