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
        const int64_t pid = e.value("pid", 0), tid = e.value("tid", 0);
        auto [it, added] =
            slice_tracks.try_emplace({pid, tid}, static_cast<sim::TrackId>(t.tracks.size()));
        if (added) {
          auto tn = thread_names.find({pid, tid});
          t.tracks.push_back(
              {process_of(pid),
               tn != thread_names.end() ? tn->second.first : fmt::format("tid {}", tid),
               sim::TrackKind::kSlices, tn != thread_names.end() ? tn->second.second : 0});
        }
        const sim::SimTime b = from_us(e.at("ts"));
        const sim::SimTime d = e.contains("dur") ? from_us(e["dur"]) : sim::SimTime{};
        t.slices.push_back({it->second, e.value("name", ""), e.value("cat", ""), b, b + d,
                            e.contains("args") ? e["args"] : nlohmann::json::object()});
      } else if (ph == "C") {
        const int64_t pid = e.value("pid", 0);
        const std::string name = e.value("name", "");
        auto [it, added] =
            counter_tracks.try_emplace({pid, name}, static_cast<sim::TrackId>(t.tracks.size()));
        if (added) t.tracks.push_back({process_of(pid), name, sim::TrackKind::kCounter, 0});
        double v = 0;
        if (e.contains("args") && e["args"].is_object() && !e["args"].empty()) {
          v = e["args"].begin()->get<double>();
        }
        t.counters.push_back({it->second, from_us(e.at("ts")), v});
      }
    } catch (const nlohmann::json::exception& ex) {
      throw TraceFormatError(
          fmt::format("{}: event {} is malformed: {}", origin, index, ex.what()));
    }
  }
  return t;
}

}  // namespace neuronsim::traces
