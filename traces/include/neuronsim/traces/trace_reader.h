#pragma once
// Reads a Chrome trace-event JSON file written by ChromeJsonSink (or any Chrome trace with "X",
// "C" and "M" events) back into records.
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// The text is not JSON at all.
class TraceSyntaxError : public TraceFormatError {
 public:
  using TraceFormatError::TraceFormatError;
};

Trace read_trace_file(const std::string& path);

/// The fields of a Chrome "X" event (its args are the event's "args"); nlohmann::json
/// exceptions when a field has the wrong type or "ts" is missing.
struct ChromeSliceEvent {
  int64_t pid = 0, tid = 0;
  std::string name, category;
  sim::SimTime begin, end;
};
ChromeSliceEvent decode_slice_event(const nlohmann::json& e);
/// The fields of a Chrome "C" event (its value: the first arg).
struct ChromeCounterEvent {
  int64_t pid = 0;
  std::string name;
  sim::SimTime t;
  double value = 0;
};
ChromeCounterEvent decode_counter_event(const nlohmann::json& e);
/// The error for event `index` (from 1) of `origin`, whose fields `ex` complained about.
TraceFormatError malformed_event(const std::string& origin, size_t index, const std::exception& ex);
/// A Chrome trace (an object with "traceEvents", or a bare event array); `origin` names it in
/// errors.
Trace parse_trace(const std::string& text, const std::string& origin);
Trace trace_from_json(const nlohmann::json& doc, const std::string& origin);
/// The JSON document of a trace or summary file (TraceSyntaxError when it is not JSON).
nlohmann::json parse_json(const std::string& text, const std::string& origin);
/// A trace written by neuronsim: a Chrome trace object with neuronsim's run metadata
/// (device_time_ns, peaks) in "otherData".
Trace parse_neuronsim_trace(const nlohmann::json& doc, const std::string& origin);

}  // namespace neuronsim::traces
