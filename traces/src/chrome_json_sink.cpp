#include <pthread.h>

#include <atomic>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/traces/sinks.h"

namespace neuronsim::traces {
namespace {

// Records per batch handed to the writer, and batches it may have queued before a recording
// thread waits for it (bounds the memory a fast producer can hold).
constexpr size_t kBatchRecords = 4096;
constexpr size_t kMaxQueuedBatches = 16;

// Chrome trace timestamps are microseconds; print picoseconds exactly (6 decimals).
void append_us(std::string& buf, sim::SimTime t) {
  fmt::format_to(std::back_inserter(buf), "{}.{:06}", t.ps / 1000000, t.ps % 1000000);
}

// A JSON string, as nlohmann::json(s).dump() writes it (names and categories are almost always
// plain ASCII: those skip building a JSON value).
void append_string(std::string& buf, std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') {
      buf += nlohmann::json(std::string(s)).dump();
      return;
    }
  }
  buf += '"';
  buf.append(s);
  buf += '"';
}

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
  writer_ = std::make_unique<Writer>();
  writer_->thread = std::thread([this, w = writer_.get()] { writer_loop(*w); });
}

ChromeJsonSink::~ChromeJsonSink() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; finish() reports the error when called
  }
}

void ChromeJsonSink::push(Record&& r) {
  if (finished_ || forked()) return;
  if (batch_.capacity() < kBatchRecords) batch_.reserve(kBatchRecords);
  batch_.push_back(std::move(r));
  if (batch_.size() >= kBatchRecords) hand_over();
}

void ChromeJsonSink::hand_over() {
  if (batch_.empty()) return;
  Writer& w = *writer_;
  std::unique_lock<std::mutex> lock(w.mutex);
  w.drained.wait(lock, [&] { return w.queue.size() < kMaxQueuedBatches || !w.error.empty(); });
  w.queue.push_back(std::move(batch_));
  batch_ = {};
  w.ready.notify_one();
}

void ChromeJsonSink::writer_loop(Writer& w) {
  std::string buf;
  for (;;) {
    std::vector<Record> batch;
    {
      std::unique_lock<std::mutex> lock(w.mutex);
      w.ready.wait(lock, [&] { return !w.queue.empty() || w.closing; });
      if (w.queue.empty()) return;  // closing and drained
      batch = std::move(w.queue.front());
      w.queue.pop_front();
    }
    try {
      if (w.error.empty()) write(batch, buf);
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(w.mutex);
      w.error = e.what();
    }
    batch.clear();  // the args JSON freed here, off the recording thread
    w.drained.notify_all();
  }
}

void ChromeJsonSink::write(const std::vector<Record>& batch, std::string& buf) {
  buf.clear();
  for (const Record& r : batch) {
    buf += first_ ? "" : ",\n";
    first_ = false;
    if (!r.track) {
      buf += r.name;
    } else if (r.is_counter) {
      fmt::format_to(std::back_inserter(buf), "{{\"ph\":\"C\",\"pid\":{},\"ts\":", r.track->pid);
      append_us(buf, r.begin);
      buf += ",\"name\":";
      append_string(buf, r.track->name);
      buf += ",\"args\":{\"value\":";
      buf += nlohmann::json(r.value).dump();
      buf += "}}";
    } else {
      // Built by hand: the timestamps must stay exact decimal strings.
      fmt::format_to(std::back_inserter(buf),
                     "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", r.track->pid, r.track->tid);
      append_us(buf, r.begin);
      buf += ",\"dur\":";
      append_us(buf, r.end - r.begin);
      buf += ",\"name\":";
      append_string(buf, r.name);
      buf += ",\"cat\":";
      append_string(buf, r.category);
      buf += ",\"args\":";
      buf += r.args.is_null() ? "{}" : r.args.dump();
      buf += '}';
    }
  }
  out_.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

void ChromeJsonSink::event(const nlohmann::json& e) {
  Record r;
  r.name = e.dump();
  push(std::move(r));
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
                           sim::SimTime begin, sim::SimTime end, nlohmann::json args) {
  Record r;
  r.track = &tracks_.at(track);
  r.name = name;
  r.category = category;
  r.begin = begin;
  r.end = end;
  r.args = std::move(args);
  push(std::move(r));
}

void ChromeJsonSink::counter(sim::TrackId track, sim::SimTime time, double value) {
  Record r;
  r.track = &tracks_.at(track);
  r.is_counter = true;
  r.begin = time;
  r.value = value;
  push(std::move(r));
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
