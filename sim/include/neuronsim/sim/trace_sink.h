#pragma once
// Models publish plain trace records to a sink; what the sink does with them (Chrome JSON, memory,
// nothing) is not the model's concern. A disabled sink costs one branch per record site.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/trace_args.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::sim {

using TrackId = uint32_t;

enum class TrackKind { kSlices, kCounter };

/// A timeline row. `process` groups rows (one per NeuronCore, "nc0"); `name` is the row.
struct TrackInfo {
  std::string process;
  std::string name;
  TrackKind kind = TrackKind::kSlices;
  int sort_index = 0;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  /// False for sinks that drop everything: callers skip building records.
  virtual bool enabled() const { return true; }
  virtual TrackId add_track(const TrackInfo& info) = 0;
  /// A duration on a slice track. `args` (operands, cycles, bytes, flops ...) and `name` are
  /// borrowed: a sink copies what it keeps before returning.
  virtual void slice(TrackId track, std::string_view name, std::string_view category, SimTime begin,
                     SimTime end, const TraceArgs& args) = 0;
  /// A sample of a counter track, holding from `t` until the next sample.
  virtual void counter(TrackId track, SimTime t, double value) = 0;
  /// Run-level metadata (the configuration used, peaks for summaries, tool versions).
  virtual void metadata(const std::string& key, nlohmann::json value) = 0;
};

/// Drops everything.
class NullTraceSink final : public TraceSink {
 public:
  bool enabled() const override { return false; }
  TrackId add_track(const TrackInfo&) override { return 0; }
  void slice(TrackId, std::string_view, std::string_view, SimTime, SimTime,
             const TraceArgs&) override {}
  void counter(TrackId, SimTime, double) override {}
  void metadata(const std::string&, nlohmann::json) override {}
};

/// The process-wide null sink models use when none is attached.
TraceSink& null_trace_sink();

}  // namespace neuronsim::sim
