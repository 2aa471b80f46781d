#pragma once
// What a user reads after a run: per-engine busy time and utilisation, the bottleneck, bytes
// moved, achieved FLOP/s and bandwidth against the preset's peaks, and per-kernel times.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/traces/trace_record.h"

namespace neuronsim::traces {

struct EngineSummary {
  std::string process;  // "nc0"
  std::string engine;   // "TensorE", "DMA q3", "DMA (all queues)"
  uint64_t instructions = 0;
  sim::SimTime busy;  // union of the engine's slices
  double utilisation = 0;
};

struct KernelSummary {
  std::string name;
  uint64_t launches = 0;
  sim::SimTime total;
};

struct Summary {
  sim::SimTime begin, end;
  std::vector<EngineSummary> engines;
  std::string bottleneck;  // "nc0 TensorE"
  double bottleneck_utilisation = 0;
  double flops = 0, dma_bytes = 0, hbm_bytes = 0;
  double achieved_flops_per_s = 0, peak_flops_per_s = 0;
  double achieved_hbm_bytes_per_s = 0, peak_hbm_bytes_per_s = 0;
  std::vector<KernelSummary> kernels;
  std::string preset;

  sim::SimTime duration() const { return end - begin; }
  nlohmann::json to_json() const;
};

Summary summarize(const Trace& trace);
/// The text report the tools print.
std::string format_summary(const Summary& s);

/// Engine-by-engine and kernel-by-kernel comparison of two runs.
std::string format_diff(const Summary& a, const Summary& b, const std::string& name_a,
                        const std::string& name_b);
nlohmann::json diff_json(const Summary& a, const Summary& b);

/// Union length of [begin, end) intervals.
sim::SimTime union_length(std::vector<std::pair<uint64_t, uint64_t>> intervals);

}  // namespace neuronsim::traces
