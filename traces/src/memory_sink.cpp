#include "neuronsim/traces/sinks.h"

namespace neuronsim::traces {

sim::TrackId MemoryTraceSink::add_track(const sim::TrackInfo& info) {
  trace_.tracks.push_back(info);
  return static_cast<sim::TrackId>(trace_.tracks.size() - 1);
}

void MemoryTraceSink::slice(sim::TrackId track, std::string_view name, std::string_view category,
                            sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) {
  trace_.slices.push_back(
      {track, std::string(name), std::string(category), begin, end, args.to_json()});
}

void MemoryTraceSink::counter(sim::TrackId track, sim::SimTime t, double value) {
  trace_.counters.push_back({track, t, value});
}

void MemoryTraceSink::metadata(const std::string& key, nlohmann::json value) {
  trace_.metadata[key] = std::move(value);
}

}  // namespace neuronsim::traces
