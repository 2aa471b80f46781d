#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/traces/sinks.h"

namespace neuronsim::traces {
namespace {

// Chrome trace timestamps are microseconds; print picoseconds exactly (6 decimals).
std::string us(sim::SimTime t) {
  return fmt::format("{}.{:06}", t.ps / 1000000, t.ps % 1000000);
}

}  // namespace

ChromeJsonSink::ChromeJsonSink(const std::string& path) : out_(path), path_(path) {
  if (!out_) throw std::runtime_error("cannot write trace file '" + path + "'");
  out_ << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}

ChromeJsonSink::~ChromeJsonSink() {
  finish();
}

void ChromeJsonSink::event(const nlohmann::json& e) {
  out_ << (first_ ? "" : ",\n") << e.dump();
  first_ = false;
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
  const Track& t = tracks_.at(track);
  // Build the line by hand: the timestamps must stay exact decimal strings.
  out_ << (first_ ? "" : ",\n")
       << fmt::format(
              "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"name\":{},\"cat\":{},"
              "\"args\":{}}}",
              t.pid, t.tid, us(begin), us(end - begin), nlohmann::json(name).dump(),
              nlohmann::json(category).dump(), args.is_null() ? "{}" : args.dump());
  first_ = false;
}

void ChromeJsonSink::counter(sim::TrackId track, sim::SimTime time, double value) {
  const Track& t = tracks_.at(track);
  out_ << (first_ ? "" : ",\n")
       << fmt::format("{{\"ph\":\"C\",\"pid\":{},\"ts\":{},\"name\":{},\"args\":{{\"value\":{}}}}}",
                      t.pid, us(time), nlohmann::json(t.name).dump(), nlohmann::json(value).dump());
  first_ = false;
}

void ChromeJsonSink::metadata(const std::string& key, nlohmann::json value) {
  metadata_[key] = std::move(value);
}

void ChromeJsonSink::finish() {
  if (finished_) return;
  finished_ = true;
  out_ << "\n],\"otherData\":" << metadata_.dump() << "}\n";
  out_.close();
}

}  // namespace neuronsim::traces
