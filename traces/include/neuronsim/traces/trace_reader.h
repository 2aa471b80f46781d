#pragma once
// Reads a Chrome trace-event JSON file written by ChromeJsonSink (or any Chrome trace with "X",
// "C" and "M" events) back into records.
#include <stdexcept>
#include <string>

#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Trace read_trace_file(const std::string& path);
Trace parse_trace(const std::string& text, const std::string& origin);

}  // namespace neuronsim::traces
