#include "neuronsim/traces/sinks.h"

namespace neuronsim::traces {

TeeTraceSink::TeeTraceSink(std::vector<sim::TraceSink*> sinks) : sinks_(std::move(sinks)) {
  for (auto* s : sinks_) enabled_ |= s->enabled();
}

sim::TrackId TeeTraceSink::add_track(const sim::TrackInfo& info) {
  std::vector<sim::TrackId> ids;
  for (auto* s : sinks_) ids.push_back(s->add_track(info));
  ids_.push_back(std::move(ids));
  return static_cast<sim::TrackId>(ids_.size() - 1);
}

void TeeTraceSink::slice(sim::TrackId track, std::string_view name, std::string_view category,
                         sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) {
  for (size_t i = 0; i < sinks_.size(); ++i) {
    sinks_[i]->slice(ids_[track][i], name, category, begin, end, args);
  }
}

void TeeTraceSink::counter(sim::TrackId track, sim::SimTime t, double value) {
  for (size_t i = 0; i < sinks_.size(); ++i) sinks_[i]->counter(ids_[track][i], t, value);
}

void TeeTraceSink::metadata(const std::string& key, nlohmann::json value) {
  for (auto* s : sinks_) s->metadata(key, value);
}

}  // namespace neuronsim::traces
