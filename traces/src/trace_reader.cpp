#include "neuronsim/traces/trace_reader.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace neuronsim::traces {
namespace {

// Microseconds (6 decimals) to integer picoseconds, rounding half to even.
sim::SimTime from_us(const nlohmann::json& v) {
  return {static_cast<uint64_t>(std::nearbyint(v.get<double>() * 1e6))};
}

}  // namespace

ChromeSliceEvent decode_slice_event(const nlohmann::json& e) {
  ChromeSliceEvent x;
  x.pid = e.value("pid", 0);
  x.tid = e.value("tid", 0);
  x.begin = from_us(e.at("ts"));
  x.end = x.begin + (e.contains("dur") ? from_us(e["dur"]) : sim::SimTime{});
  x.name = e.value("name", "");
  x.category = e.value("cat", "");
  return x;
}

ChromeCounterEvent decode_counter_event(const nlohmann::json& e) {
  ChromeCounterEvent c;
  c.pid = e.value("pid", 0);
  c.name = e.value("name", "");
  if (e.contains("args") && e["args"].is_object() && !e["args"].empty()) {
    c.value = e["args"].begin()->get<double>();
  }
  c.t = from_us(e.at("ts"));
  return c;
}

TraceFormatError malformed_event(const std::string& origin, size_t index,
                                 const std::exception& ex) {
  return TraceFormatError(fmt::format("{}: event {} is malformed: {}", origin, index, ex.what()));
}

Trace read_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TraceFormatError(fmt::format("{}: cannot open trace file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_trace(ss.str(), path);
}

nlohmann::json parse_json(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw TraceSyntaxError(fmt::format(
        "{}: not a valid JSON trace ({}){}", origin,
        e.byte >= text.size() ? "the file ends early" : "syntax error",
        e.byte >= text.size() ? " - was it truncated?" : fmt::format(" at byte {}", e.byte)));
  }
}

Trace parse_trace(const std::string& text, const std::string& origin) {
  return trace_from_json(parse_json(text, origin), origin);
}

Trace parse_neuronsim_trace(const nlohmann::json& doc, const std::string& origin) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    throw TraceFormatError(
        fmt::format("{}: not a Chrome trace (no \"traceEvents\" array)", origin));
  }
  const auto meta = doc.find("otherData");
  if (meta == doc.end() || !meta->is_object() || !meta->contains("device_time_ns") ||
      !meta->contains("peaks")) {
    throw TraceFormatError(fmt::format(
        "{}: not a neuronsim trace (no neuronsim metadata in \"otherData\"; traces come from "
        "`neuronsim run --trace` or neuronsim.tracing)",
        origin));
  }
  return trace_from_json(doc, origin);
}

Trace trace_from_json(const nlohmann::json& doc, const std::string& origin) {
  const nlohmann::json* events = nullptr;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    events = &doc["traceEvents"];
  } else if (doc.is_array()) {
    events = &doc;
  } else {
    throw TraceFormatError(
        fmt::format("{}: not a Chrome trace (no \"traceEvents\" array)", origin));
  }
  Trace t;
  if (doc.is_object() && doc.contains("otherData") && doc["otherData"].is_object()) {
    t.metadata = doc["otherData"];
  }
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, int>> thread_names;
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "M") continue;
    const int64_t pid = e.value("pid", 0), tid = e.value("tid", 0);
    const auto& args = e.contains("args") ? e["args"] : nlohmann::json::object();
    const std::string name = e.value("name", "");
    if (name == "process_name") process_names[pid] = args.value("name", "");
    if (name == "thread_name") thread_names[{pid, tid}].first = args.value("name", "");
    if (name == "thread_sort_index") thread_names[{pid, tid}].second = args.value("sort_index", 0);
  }
  std::map<std::pair<int64_t, int64_t>, sim::TrackId> slice_tracks;
  std::map<std::pair<int64_t, std::string>, sim::TrackId> counter_tracks;
  auto process_of = [&](int64_t pid) {
    auto it = process_names.find(pid);
    return it != process_names.end() ? it->second : fmt::format("pid {}", pid);
  };
  size_t index = 0;
  for (const auto& e : *events) {
    ++index;
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    try {
      if (ph == "X") {
        const ChromeSliceEvent x = decode_slice_event(e);
        auto [it, added] =
            slice_tracks.try_emplace({x.pid, x.tid}, static_cast<sim::TrackId>(t.tracks.size()));
        if (added) {
          auto tn = thread_names.find({x.pid, x.tid});
          t.tracks.push_back(
              {process_of(x.pid),
               tn != thread_names.end() ? tn->second.first : fmt::format("tid {}", x.tid),
               sim::TrackKind::kSlices, tn != thread_names.end() ? tn->second.second : 0});
        }
        t.slices.push_back({it->second, x.name, x.category, x.begin, x.end,
                            e.contains("args") ? e["args"] : nlohmann::json::object()});
      } else if (ph == "C") {
        const ChromeCounterEvent c = decode_counter_event(e);
        auto [it, added] =
            counter_tracks.try_emplace({c.pid, c.name}, static_cast<sim::TrackId>(t.tracks.size()));
        if (added) t.tracks.push_back({process_of(c.pid), c.name, sim::TrackKind::kCounter, 0});
        t.counters.push_back({it->second, c.t, c.value});
      }
    } catch (const nlohmann::json::exception& ex) {
      throw malformed_event(origin, index, ex);
    }
  }
  return t;
}

}  // namespace neuronsim::traces
