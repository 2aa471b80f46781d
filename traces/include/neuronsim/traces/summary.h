#pragma once
// What a user reads after a run: where the time went, per-engine busy time and utilisation, the
// bottleneck, bytes moved, achieved FLOP/s and bandwidth against the preset's peaks, per-kernel
// and per-op times, engine utilisation over time.
// The one definition `ncsim trace summary` and `neuronsim report/diff/run/whatif` print from:
// - the window is the recording's (the trace's begin_ns .. end_ns), widened to every slice (a
//   trace without them: the first slice's start to the last slice's end);
// - the window splits into kernels, host-device copies, collectives, waiting for other ranks, CPU
//   fallbacks, kernel launch overhead and idle time, which add up to it (time_account.h);
// - the limit is what dominates the window: the busiest engine (busy / window) or a part other
//   than kernels, whichever share is larger;
// - an engine's busy time is the union of its slices; utilisation = busy / window;
// - "DMA (all queues)" is the union over a core's DMA queues;
// - the bottleneck is the busiest compute engine or a core's DMA queues taken together (the
//   TensorE LoadStationary row is listed but is neither);
// - FLOPs come from the instructions' `flops` args, bytes from the DMA queues' `bytes` and
//   `hbm_bytes`; the peaks scale with the cores that ran instructions (HBM: with the stacks
//   those cores sit on);
// - a kernel's FLOPs and bytes are those of the instructions inside its slices on its core;
// - a compiled graph's launch is one program whose sections (the fused programs, slices of
//   category "section" inside it) are its kernels: the sections count as kernels, with the FX
//   nodes they contain, and the launch as a graph launch; an instruction of a section counts
//   for the section it started in (it may run past the section's end, inside the launch);
// - ops are the device op spans ("Ops" rows): nested spans count in their own name's total, only
//   the outermost towards the total op time.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/traces/time_account.h"
#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

struct EngineSummary {
  std::string process;  // "nc0"
  std::string engine;   // "TensorE", "DMA q3", "DMA (all queues)"
  uint64_t instructions = 0;
  sim::SimTime busy;  // union of the engine's slices
  double utilisation = 0;
  /// "engine" (a compute engine), "unit" (a unit of one: TensorE's LoadStationary), "dma" (a
  /// core's DMA queues together), "dma_queue" (one queue). Engines and "dma" rows may limit.
  std::string role;
};

struct KernelSummary {
  std::string name;
  uint64_t launches = 0;
  sim::SimTime total;
  int64_t instructions = 0;                    // from the kernel slices' `instructions` args
  double flops = 0, bytes = 0, hbm_bytes = 0;  // of the instructions inside its slices
  std::string nodes;  // a fused program of a compiled graph: the FX nodes it contains
  /// Busy time of each engine inside its slices (the union of its instructions; "DMA" for the
  /// queues together), by engine row name.
  std::map<std::string, sim::SimTime> engine_busy;
};

struct OpSummary {
  std::string name;
  uint64_t count = 0;
  sim::SimTime total;
};

/// Engine utilisation over time: the window in equal bins, per row the busy fraction of each bin.
struct Timeline {
  struct Row {
    std::string label;  // "TensorE" ("nc1 TensorE" when several cores ran), or a time part
    std::string kind;   // "engine" or "part"
    std::vector<double> busy;
  };
  sim::SimTime begin, bin;
  std::vector<Row> rows;
};

struct Summary {
  sim::SimTime begin, end;
  std::vector<EngineSummary> engines;  // per core: TensorE, its LoadStationary, VectorE, ...
  std::vector<std::string> active_cores;
  std::string bottleneck;  // "nc0 TensorE"
  double bottleneck_utilisation = 0;
  double flops = 0, dma_bytes = 0, hbm_bytes = 0;
  double achieved_flops_per_s = 0, peak_flops_per_s = 0;
  double achieved_hbm_bytes_per_s = 0, peak_hbm_bytes_per_s = 0;
  std::vector<KernelSummary> kernels;  // longest total first
  sim::SimTime kernel_time;
  std::vector<KernelSummary> graph_launches;  // compiled graphs' programs, longest total first
  std::vector<OpSummary> ops;                 // longest total first
  sim::SimTime op_time;                       // outermost op spans
  /// ATen ops on the host that launched no kernel (views, metadata, host-only), by name, most
  /// calls first: left out of `ops`.
  std::vector<std::pair<std::string, uint64_t>> ops_without_kernels;
  uint64_t instructions_outside_kernels = 0;
  TimeAccount time;           // the window split into kernels, copies, launches, ...
  sim::SimTime engines_busy;  // some engine or DMA queue busy (inside kernels)
  Limit limit;                // what dominates: "nc0 VectorE" or "kernel launch overhead"
  Timeline timeline;
  std::string preset;
  nlohmann::json metadata = nlohmann::json::object();  // the trace's, as recorded

  sim::SimTime duration() const { return end - begin; }
  /// The summary as JSON: the `neuronsim-summary/1` document (`neuronsim report --json`).
  nlohmann::json to_json() const;
};

/// The "format" of summary documents.
inline constexpr const char* kSummaryFormat = "neuronsim-summary/1";

/// Builds a Summary from a trace's records given one at a time, keeping only what the summary
/// reads: the window, and for instruction, "Kernels" and "Ops" rows each slice's times and the
/// few args it sums (48 bytes per instruction, whatever else its record held), the slices that
/// count towards a part of the time account, and which host ops launched nothing.
class SummaryBuilder {
 public:
  SummaryBuilder();
  ~SummaryBuilder();
  /// Names a process and a row (`pid`, `tid`: any ids); a row's slices may come before its name.
  void name_process(int64_t pid, const std::string& name);
  void name_row(int64_t pid, int64_t tid, const std::string& name);
  void slice(int64_t pid, int64_t tid, std::string_view name, std::string_view category,
             sim::SimTime begin, sim::SimTime end, const nlohmann::json& args);
  /// The trace's run metadata ("otherData").
  void set_metadata(nlohmann::json metadata);
  /// `bins`: the timeline's resolution.
  Summary finish(size_t bins = 200);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// `bins`: the timeline's resolution.
Summary summarize(const Trace& trace, size_t bins = 200);
/// The summary of a Chrome trace file read as it streams (trace_stream.h); errors as
/// summarize(read_trace_file(path)).
Summary summarize_file(const std::string& path);
/// The summary document (to_json()) of the neuronsim trace in `text`; with `accept_summary`, the
/// text may also be a summary document itself (`neuronsim run --summary-json`), returned as it
/// is. TraceFormatError (TraceSyntaxError for non-JSON) names `origin` and the problem.
nlohmann::json summary_document(const std::string& text, const std::string& origin,
                                bool accept_summary);
/// The text report the tools print.
std::string format_summary(const Summary& s);

/// Two summary documents (to_json(), or `neuronsim run --summary-json` files) compared: totals,
/// engine by engine, op by op (largest change in device time first).
nlohmann::json diff_json(const nlohmann::json& a, const nlohmann::json& b);
/// Engine-by-engine and kernel-by-kernel comparison of two runs as text (ncsim trace diff).
std::string format_diff(const Summary& a, const Summary& b, const std::string& name_a,
                        const std::string& name_b);

/// Union length of [begin, end) intervals.
sim::SimTime union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals);

/// Display order of a core's engine rows: TensorE, its LoadStationary row, VectorE, ScalarE,
/// GpSimdE, DMA (all queues), DMA q0, q1, ... then anything else by name.
bool engine_before(const std::string& a, const std::string& b);
/// Engine labels ("TensorE", or "nc1 DMA q2" with the core first) sorted core by core in that
/// order.
void sort_engine_labels(std::vector<std::string>& labels);

/// summary_document() of the file at `path`, read as it streams: memory holds the summary's
/// compact slices, not the document.
nlohmann::json summary_document_file(const std::string& path, bool accept_summary);
/// The "otherData" of a Chrome trace file (an empty object when it has none), read as it
/// streams.
nlohmann::json trace_metadata_file(const std::string& path);
/// The text report the tools print.
std::string format_summary(const Summary& s);

/// Two summary documents (to_json(), or `neuronsim run --summary-json` files) compared: totals,
/// engine by engine, op by op (largest change in device time first).
nlohmann::json diff_json(const nlohmann::json& a, const nlohmann::json& b);
/// Engine-by-engine and kernel-by-kernel comparison of two runs as text (ncsim trace diff).
std::string format_diff(const Summary& a, const Summary& b, const std::string& name_a,
                        const std::string& name_b);

/// Union length of [begin, end) intervals.
sim::SimTime union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals);

/// Display order of a core's engine rows: TensorE, its LoadStationary row, VectorE, ScalarE,
/// GpSimdE, DMA (all queues), DMA q0, q1, ... then anything else by name.
bool engine_before(const std::string& a, const std::string& b);
/// Engine labels ("TensorE", or "nc1 DMA q2" with the core first) sorted core by core in that
/// order.
void sort_engine_labels(std::vector<std::string>& labels);

}  // namespace neuronsim::traces
