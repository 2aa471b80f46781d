#pragma once
// TraceSink implementations: Chrome trace-event JSON (opens in the Perfetto UI), in-memory (for
// tests and summaries), and a tee that feeds several sinks.
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "neuronsim/sim/trace_sink.h"
#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

/// Writes events to a file; finish() (or the destructor) closes the document. Output bytes
/// depend only on the records, so identical runs give identical files.
///
/// Recording is batched: slice() and counter() only append a plain record (the args JSON moved,
/// not serialised) to a batch; a full batch goes to a writer thread that formats and writes it,
/// in order, while the simulation goes on (serialising every instruction's record on the
/// simulating thread cost more than simulating it). finish() drains the writer.
class ChromeJsonSink final : public sim::TraceSink {
 public:
  explicit ChromeJsonSink(const std::string& path);
  ~ChromeJsonSink() override;
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, nlohmann::json args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;
  /// Writes the metadata and closes the file. Idempotent. Rethrows a write error.
  void finish();

 private:
  struct Track {
    int pid, tid;
    std::string name;
    sim::TrackKind kind;
  };
  struct Record {
    const Track* track = nullptr;  // null: `name` is a whole preformatted event
    bool is_counter = false;
    std::string name, category;
    sim::SimTime begin, end;
    double value = 0;
    nlohmann::json args;
  };
  // The writer's state, held by pointer: a process forked while recording has no writer
  // thread (and may have copied its mutex locked, its condition variables waited on); its copy
  // of the sink records nothing and leaks this rather than join, lock or destroy any of it.
  struct Writer {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable ready, drained;
    std::deque<std::vector<Record>> queue;
    bool closing = false;
    std::string error;  // the first error (a record whose JSON cannot serialise)
  };
  void event(const nlohmann::json& e);
  bool forked();
  void push(Record&& r);
  void hand_over();
  void writer_loop(Writer& w);
  void write(const std::vector<Record>& batch, std::string& buf);
  int pid_of(const std::string& process);
  std::ofstream out_;
  std::string path_;
  bool first_ = true, finished_ = false;  // first_: the writer's
  std::map<std::string, int> pids_;
  std::deque<Track> tracks_;  // a deque: records point into it while it grows
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<Record> batch_;
  std::unique_ptr<Writer> writer_;
  unsigned fork_generation_ = 0;  // the process's fork count (as a child) at construction
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
