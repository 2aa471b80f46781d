#pragma once
// Reads a Chrome trace-event JSON file event by event as it streams from disk: memory holds one
// event at a time (and the document's other members, such as "otherData"), whatever the file's
// size. What `neuronsim report` and `neuronsim run --trace` summarise a long run with.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace neuronsim::traces {

class TraceEventHandler {
 public:
  virtual ~TraceEventHandler() = default;
  /// One element of "traceEvents" (or of a bare event array); `index` counts from 1.
  virtual void event(const nlohmann::json& e, size_t index) = 0;
};

/// What the document held besides its events.
struct StreamedDocument {
  bool is_object = false;        // the document is an object (else a bare array or a scalar)
  bool has_event_array = false;  // "traceEvents" is an array, or the document a bare array
  nlohmann::json members = nlohmann::json::object();  // the object's other members
};

/// Streams `path` through `handler`. Errors: TraceFormatError when the file cannot be opened,
/// TraceSyntaxError (the messages parse_json gives) when it is not JSON; whatever the handler
/// throws passes through.
StreamedDocument stream_trace_file(const std::string& path, TraceEventHandler& handler);

}  // namespace neuronsim::traces
