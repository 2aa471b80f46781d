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

class RecordBatch;

/// A row of a Chrome trace: its process and thread ids and its name (a counter's name).
struct ChromeTrack {
  int pid, tid;
  std::string name;
  sim::TrackKind kind;
};

/// Writes events to a file; finish() (or the destructor) closes the document. Output bytes
/// depend only on the records, so identical runs give identical files.
///
/// Recording is batched: slice() and counter() only copy a record's names and args into a flat
/// batch (traces/src/record_batch.h: no JSON value built, nothing formatted); a full batch goes
/// to a writer thread that formats and writes it, in order, while the simulation goes on
/// (serialising every instruction's record on the simulating thread cost more than simulating
/// it). Memory stays bounded: at most kMaxQueuedBatches batches wait for the writer, and
/// written batches are reused. finish() drains the writer.
class ChromeJsonSink final : public sim::TraceSink {
 public:
  explicit ChromeJsonSink(const std::string& path);
  ~ChromeJsonSink() override;
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;
  /// Writes the metadata and closes the file. Idempotent. Rethrows a write error.
  void finish();

 private:
  // The writer's state, held by pointer: a process forked while recording has no writer
  // thread (and may have copied its mutex locked, its condition variables waited on); its copy
  // of the sink records nothing and leaks this rather than join, lock or destroy any of it.
  struct Writer {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable ready, drained;
    std::deque<std::unique_ptr<RecordBatch>> queue, spare;  // spare: written, for reuse
    bool closing = false;
    std::string error;  // the first error (a record whose JSON cannot serialise)
  };
  void event(const nlohmann::json& e);
  bool forked();
  bool recording();
  void after_append();
  void hand_over();
  void writer_loop(Writer& w);
  int pid_of(const std::string& process);
  std::ofstream out_;
  std::string path_;
  bool first_ = true, finished_ = false;  // first_: the writer's
  std::map<std::string, int> pids_;
  std::deque<ChromeTrack> tracks_;  // a deque: records point into it while it grows
  nlohmann::json metadata_ = nlohmann::json::object();
  std::unique_ptr<RecordBatch> batch_;
  std::unique_ptr<Writer> writer_;
  unsigned fork_generation_ = 0;  // the process's fork count (as a child) at construction
};

/// Keeps every record (tests, summaries of live runs).
class MemoryTraceSink final : public sim::TraceSink {
 public:
  sim::TrackId add_track(const sim::TrackInfo& info) override;
  void slice(sim::TrackId track, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) override;
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
             sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) override;
  void counter(sim::TrackId track, sim::SimTime t, double value) override;
  void metadata(const std::string& key, nlohmann::json value) override;

 private:
  std::vector<sim::TraceSink*> sinks_;
  std::vector<std::vector<sim::TrackId>> ids_;  // per tee track: the id in each sink
  bool enabled_ = false;
};

}  // namespace neuronsim::traces
