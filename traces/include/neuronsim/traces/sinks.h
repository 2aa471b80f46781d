#pragma once
// TraceSink implementations: Chrome trace-event JSON (opens in the Perfetto UI), in-memory (for
// tests and summaries), and a tee that feeds several sinks.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

/// Streams events to a file as they arrive; finish() (or the destructor) closes the document.
/// Output bytes depend only on the records, so identical runs give identical files.
class ChromeJsonSink final : public sim::TraceSink {
 public:
  explicit ChromeJsonSink(const std::string& path);
  ~ChromeJsonSink() override;
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, nlohmann::json args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;
  /// Writes the metadata and closes the file. Idempotent.
  void finish();

 private:
  void event(const nlohmann::json& e);
  int pid_of(const std::string& process);
  std::ofstream out_;
  std::string path_;
  bool first_ = true, finished_ = false;
  std::map<std::string, int> pids_;
  struct Track {
    int pid, tid;
    std::string name;
    sim::TrackKind kind;
  };
  std::vector<Track> tracks_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

/// Keeps every record (tests, summaries of live runs).
class MemoryTraceSink final : public sim::TraceSink {
 public:
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, nlohmann::json args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;
  const Trace& trace() const { return trace_; }
  Trace& trace() { return trace_; }

 private:
  Trace trace_;
};

/// Forwards to several sinks (e.g. a file and an in-memory copy for the summary).
class TeeTraceSink final : public sim::TraceSink {
 public:
  explicit TeeTraceSink(std::vector<sim::TraceSink*> sinks);
  bool enabled() const override { return enabled_; }
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, nlohmann::json args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;

 private:
  std::vector<sim::TraceSink*> sinks_;
  std::vector<std::vector<sim::TrackId>> ids_;  // per tee track: the id in each sink
  bool enabled_ = false;
};

}  // namespace neuronsim::traces
