#pragma once
// A trace as plain records: what sinks receive, what the reader returns, what summaries consume.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/trace_sink.h"

namespace neuronsim::traces {

struct SliceRecord {
  sim::TrackId track = 0;
  std::string name;
  std::string category;
  sim::SimTime begin, end;
  nlohmann::json args;
};

struct CounterRecord {
  sim::TrackId track = 0;
  sim::SimTime t;
  double value = 0;
};

/// A whole trace in memory.
struct Trace {
  std::vector<sim::TrackInfo> tracks;  // indexed by TrackId
  std::vector<SliceRecord> slices;
  std::vector<CounterRecord> counters;
  nlohmann::json metadata = nlohmann::json::object();
};

}  // namespace neuronsim::traces
