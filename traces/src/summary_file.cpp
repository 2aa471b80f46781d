// Summaries of trace files read as they stream (trace_stream.h): the file's events go straight
// into a SummaryBuilder, so memory holds the summary's compact slices, never the document.
#include <optional>

#include <fmt/format.h>

#include "neuronsim/traces/summary.h"
#include "neuronsim/traces/trace_reader.h"
#include "neuronsim/traces/trace_stream.h"

namespace neuronsim::traces {
namespace {

class SummaryReader final : public TraceEventHandler {
 public:
  SummaryReader(SummaryBuilder& b, const std::string& origin) : b_(b), origin_(origin) {}

  void event(const nlohmann::json& e, size_t index) override {
    if (!e.is_object()) return;
    static const nlohmann::json kNoArgs = nlohmann::json::object();
    try {
      const std::string ph = e.value("ph", "");
      if (ph == "M") {
        const int64_t pid = e.value("pid", 0), tid = e.value("tid", 0);
        const std::string name = e.value("name", "");
        const auto a = e.find("args");
        const nlohmann::json& args = a != e.end() ? *a : kNoArgs;
        if (name == "process_name") b_.name_process(pid, args.value("name", ""));
        if (name == "thread_name") b_.name_row(pid, tid, args.value("name", ""));
      } else if (ph == "X") {
        const ChromeSliceEvent x = decode_slice_event(e);
        const auto a = e.find("args");
        b_.slice(x.pid, x.tid, x.name, x.category, x.begin, x.end, a != e.end() ? *a : kNoArgs);
      } else if (ph == "C") {
        (void)decode_counter_event(e);  // checked as the reader checks it; not summarised
      }
    } catch (const nlohmann::json::exception& ex) {
      // Reported after the whole document was read: a syntax error or a missing member comes
      // first, as when the document is parsed whole.
      if (!error) error = malformed_event(origin_, index, ex);
    }
  }
  std::optional<TraceFormatError> error;

 private:
  SummaryBuilder& b_;
  const std::string& origin_;
};

TraceFormatError not_chrome(const std::string& origin) {
  return TraceFormatError(fmt::format("{}: not a Chrome trace (no \"traceEvents\" array)", origin));
}

nlohmann::json metadata_of(const StreamedDocument& doc) {
  const auto meta = doc.members.find("otherData");
  return meta != doc.members.end() && meta->is_object() ? *meta : nlohmann::json::object();
}

}  // namespace

Summary summarize_file(const std::string& path) {
  SummaryBuilder b;
  SummaryReader reader(b, path);
  const StreamedDocument doc = stream_trace_file(path, reader);
  if (!doc.has_event_array) throw not_chrome(path);
  if (reader.error) throw *reader.error;
  b.set_metadata(metadata_of(doc));
  return b.finish();
}

nlohmann::json summary_document_file(const std::string& path, bool accept_summary) {
  SummaryBuilder b;
  SummaryReader reader(b, path);
  StreamedDocument doc = stream_trace_file(path, reader);
  const nlohmann::json& m = doc.members;
  if (accept_summary && doc.is_object) {
    if (m.value("format", nlohmann::json()) == kSummaryFormat) return std::move(doc.members);
    if (!doc.has_event_array && !m.contains("traceEvents")) {
      throw TraceFormatError(fmt::format(
          "{}: neither a neuronsim trace nor a `neuronsim run --summary-json` file", path));
    }
  }
  if (!doc.is_object || !doc.has_event_array) throw not_chrome(path);
  const auto meta = m.find("otherData");
  if (meta == m.end() || !meta->is_object() || !meta->contains("device_time_ns") ||
      !meta->contains("peaks")) {
    throw TraceFormatError(fmt::format(
        "{}: not a neuronsim trace (no neuronsim metadata in \"otherData\"; traces come from "
        "`neuronsim run --trace` or neuronsim.tracing)",
        path));
  }
  if (reader.error) throw *reader.error;
  b.set_metadata(*meta);
  return b.finish().to_json();
}

nlohmann::json trace_metadata_file(const std::string& path) {
  class Skip final : public TraceEventHandler {
    void event(const nlohmann::json&, size_t) override {}
  } skip;
  const StreamedDocument doc = stream_trace_file(path, skip);
  if (!doc.is_object || !doc.has_event_array) throw not_chrome(path);
  return metadata_of(doc);
}

}  // namespace neuronsim::traces
