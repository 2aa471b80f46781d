#pragma once
// A batch of trace records in flat storage: the recording thread appends records (copying their
// names and args into one byte buffer: no allocation per record, no formatting), the file
// sink's writer thread turns the batch into Chrome trace-event JSON.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/trace_args.h"
#include "neuronsim/sim/units.h"
#include "neuronsim/traces/sinks.h"

namespace neuronsim::traces {

class RecordBatch {
 public:
  void add_slice(const ChromeTrack* track, std::string_view name, std::string_view category,
                 sim::SimTime begin, sim::SimTime end, const sim::TraceArgs& args);
  void add_counter(const ChromeTrack* track, sim::SimTime t, double value);
  /// A whole event, already serialised (metadata events).
  void add_event(std::string_view json_text);

  size_t records() const { return records_.size(); }
  size_t bytes() const { return bytes_.size(); }
  bool empty() const { return records_.empty(); }
  /// Keeps the buffers' capacity for the next batch.
  void clear();
  /// Appends the records as Chrome JSON events, each but the first preceded by ",\n" (`first`
  /// says whether the file has no event yet; it is updated).
  void write_json(std::string& out, bool& first) const;

 private:
  enum class Kind : uint8_t { kSlice, kCounter, kEvent };
  struct Record {
    Kind kind = Kind::kSlice;
    uint8_t args = 0;   // encoded entries at args_at
    int32_t json = -1;  // index in json_: the args' JSON object members
    const ChromeTrack* track = nullptr;
    sim::SimTime begin, end;
    double value = 0;
    uint32_t name_at = 0, name_len = 0, category_at = 0, category_len = 0, args_at = 0;
  };
  uint32_t append(std::string_view s);
  std::string_view text(uint32_t at, uint32_t len) const { return {bytes_.data() + at, len}; }

  std::vector<Record> records_;
  std::string bytes_;  // names, categories, encoded args entries
  std::vector<nlohmann::json> json_;
};

}  // namespace neuronsim::traces
