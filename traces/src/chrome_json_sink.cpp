#include <pthread.h>

#include <atomic>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/traces/sinks.h"
#include "record_batch.h"

namespace neuronsim::traces {
namespace {

// Records (or bytes of names and args) per batch handed to the writer, and batches it may have
// queued before a recording thread waits for it (bounds the memory a fast producer can hold).
constexpr size_t kBatchRecords = 4096;
constexpr size_t kBatchBytes = 1 << 20;
constexpr size_t kMaxQueuedBatches = 16;

// How many times this process's ancestry forked into it: a sink made before the last fork
// belongs to the parent (its writer thread did not come along).
std::atomic<unsigned> g_forks{0};
const bool g_fork_handler = [] {
  pthread_atfork(nullptr, nullptr, [] { g_forks.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

}  // namespace

bool ChromeJsonSink::forked() {
  if (g_forks.load(std::memory_order_relaxed) == fork_generation_) return false;
  // The parent writes the file; this copy records nothing and never touches the writer's
  // mutex (another thread may have held it at the fork) or thread.
  finished_ = true;
  (void)writer_.release();
  return true;
}

ChromeJsonSink::ChromeJsonSink(const std::string& path) : out_(path), path_(path) {
  if (!out_) throw std::runtime_error("cannot write trace file '" + path + "'");
  out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  (void)g_fork_handler;
  fork_generation_ = g_forks.load(std::memory_order_relaxed);
  batch_ = std::make_unique<RecordBatch>();
  writer_ = std::make_unique<Writer>();
  writer_->thread = std::thread([this, w = writer_.get()] { writer_loop(*w); });
}

ChromeJsonSink::~ChromeJsonSink() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; finish() reports the error when called
  }
}

bool ChromeJsonSink::recording() {
  return !finished_ && !forked();
}

void ChromeJsonSink::after_append() {
  if (batch_->records() >= kBatchRecords || batch_->bytes() >= kBatchBytes) hand_over();
}

void ChromeJsonSink::hand_over() {
  if (batch_->empty()) return;
  Writer& w = *writer_;
  std::unique_lock<std::mutex> lock(w.mutex);
  w.drained.wait(lock, [&] { return w.queue.size() < kMaxQueuedBatches || !w.error.empty(); });
  w.queue.push_back(std::move(batch_));
  if (!w.spare.empty()) {
    batch_ = std::move(w.spare.front());
    w.spare.pop_front();
  }
  w.ready.notify_one();
  lock.unlock();
  if (!batch_) batch_ = std::make_unique<RecordBatch>();
}

void ChromeJsonSink::writer_loop(Writer& w) {
  std::string buf;
  for (;;) {
    std::unique_ptr<RecordBatch> batch;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      w.ready.wait(lock, [&] { return !w.queue.empty() || w.closing; });
      if (w.queue.empty()) return;  // closing and drained
      batch = std::move(w.queue.front());
      w.queue.pop_front();
    }
    try {
      if (w.error.empty()) {
        buf.clear();
        batch->write_json(buf, first_);
        out_.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      }
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(w.mutex);
      w.error = e.what();
    }
    batch->clear();  // the args JSON freed here, off the recording thread
    {
      const std::lock_guard<std::mutex> lock(w.mutex);
      if (w.spare.size() < 2) w.spare.push_back(std::move(batch));
    }
    w.drained.notify_all();
  }
}

void ChromeJsonSink::event(const nlohmann::json& e) {
  if (!recording()) return;
  batch_->add_event(e.dump());
  after_append();
}

int ChromeJsonSink::pid_of(const std::string& process) {
  auto it = pids_.find(process);
  if (it != pids_.end()) return it->second;
  const int pid = static_cast<int>(pids_.size()) + 1;
  pids_[process] = pid;
  event({{"ph", "M"},
         {"name", "process_name"},
         {"pid", pid},
         {"tid", 0},
         {"args", {{"name", process}}}});
  event({{"ph", "M"},
         {"name", "process_sort_index"},
         {"pid", pid},
         {"tid", 0},
         {"args", {{"sort_index", pid}}}});
  return pid;
}

sim::TrackId ChromeJsonSink::add_track(const sim::TrackInfo& info) {
  // Re-attaching to a device asks for the same rows again: reuse them.
  const int pid = pid_of(info.process);
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (tracks_[i].pid == pid && tracks_[i].name == info.name && tracks_[i].kind == info.kind) {
      return static_cast<sim::TrackId>(i);
    }
  }
  const int tid = static_cast<int>(tracks_.size()) + 1;
  tracks_.push_back({pid, tid, info.name, info.kind});
  if (info.kind == sim::TrackKind::kSlices) {
    event({{"ph", "M"},
           {"name", "thread_name"},
           {"pid", pid},
           {"tid", tid},
           {"args", {{"name", info.name}}}});
    event({{"ph", "M"},
           {"name", "thread_sort_index"},
           {"pid", pid},
           {"tid", tid},
           {"args", {{"sort_index", info.sort_index}}}});
  }
  return static_cast<sim::TrackId>(tracks_.size() - 1);
}

void ChromeJsonSink::slice(sim::TrackId track, std::string_view name, std::string_view category,
                           sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args) {
  const ChromeTrack* t = &tracks_.at(track);
  if (!recording()) return;
  batch_->add_slice(t, name, category, begin, end, args);
  after_append();
}

void ChromeJsonSink::counter(sim::TrackId track, sim::SimTime time, double value) {
  const ChromeTrack* t = &tracks_.at(track);
  if (!recording()) return;
  batch_->add_counter(t, time, value);
  after_append();
}

void ChromeJsonSink::metadata(const std::string& key, nlohmann::json value) {
  metadata_[key] = std::move(value);
}

void ChromeJsonSink::finish() {
  if (finished_ || forked()) return;
  hand_over();
  finished_ = true;
  Writer& w = *writer_;
  {
    const std::lock_guard<std::mutex> lock(w.mutex);
    w.closing = true;
  }
  w.ready.notify_one();
  w.thread.join();
  out_ << "\n],\"otherData\":" << metadata_.dump() << "}\n";
  out_.close();
  if (!w.error.empty()) throw std::runtime_error("trace file '" + path_ + "': " + w.error);
}

}  // namespace neuronsim::traces
