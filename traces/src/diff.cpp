#include <map>

#include <fmt/format.h>

#include "neuronsim/traces/summary.h"

namespace neuronsim::traces {
namespace {

std::string ratio(double a, double b) {
  return a > 0 ? fmt::format("{:.3f}x", b / a) : "-";
}

}  // namespace

nlohmann::json diff_json(const Summary& a, const Summary& b) {
  nlohmann::json j;
  j["a"] = a.to_json();
  j["b"] = b.to_json();
  j["duration_ratio"] =
      a.duration().ps ? static_cast<double>(b.duration().ps) / a.duration().ps : 0.0;
  return j;
}

std::string format_diff(const Summary& a, const Summary& b, const std::string& na,
                        const std::string& nb) {
  std::string out;
  out += fmt::format("A = {}\nB = {}\n\n", na, nb);
  out += fmt::format("{:<26} {:>14} {:>14} {:>10}\n", "", "A", "B", "B/A");
  auto row = [&](const std::string& what, double x, double y, const std::string& unit) {
    out += fmt::format("{:<26} {:>12.3f}{:<2} {:>12.3f}{:<2} {:>10}\n", what, x, unit, y, unit,
                       ratio(x, y));
  };
  row("simulated time (us)", a.duration().us(), b.duration().us(), "");
  row("TensorE TFLOP/s", a.achieved_flops_per_s * 1e-12, b.achieved_flops_per_s * 1e-12, "");
  row("HBM GB/s", a.achieved_hbm_bytes_per_s * 1e-9, b.achieved_hbm_bytes_per_s * 1e-9, "");
  row("DMA MiB", a.dma_bytes / (1 << 20), b.dma_bytes / (1 << 20), "");
  out += fmt::format("bottleneck: A {} ({:.1f}%), B {} ({:.1f}%)\n", a.bottleneck,
                     100 * a.bottleneck_utilisation, b.bottleneck, 100 * b.bottleneck_utilisation);

  out += fmt::format("\n{:<26} {:>12} {:>12} {:>10} {:>8} {:>8}\n", "engine busy (us)", "A", "B",
                     "B/A", "util A", "util B");
  std::map<std::string, std::pair<const EngineSummary*, const EngineSummary*>> engines;
  for (const auto& e : a.engines) engines[e.process + " " + e.engine].first = &e;
  for (const auto& e : b.engines) engines[e.process + " " + e.engine].second = &e;
  for (const auto& [name, p] : engines) {
    const double x = p.first ? p.first->busy.us() : 0, y = p.second ? p.second->busy.us() : 0;
    out += fmt::format("{:<26} {:>12.3f} {:>12.3f} {:>10} {:>7.1f}% {:>7.1f}%\n", name, x, y,
                       ratio(x, y), p.first ? 100 * p.first->utilisation : 0.0,
                       p.second ? 100 * p.second->utilisation : 0.0);
  }
  std::map<std::string, std::pair<const KernelSummary*, const KernelSummary*>> kernels;
  for (const auto& k : a.kernels) kernels[k.name].first = &k;
  for (const auto& k : b.kernels) kernels[k.name].second = &k;
  if (!kernels.empty()) {
    out += fmt::format("\n{:<40} {:>12} {:>12} {:>10}\n", "kernel total (us)", "A", "B", "B/A");
    for (const auto& [name, p] : kernels) {
      const double x = p.first ? p.first->total.us() : 0, y = p.second ? p.second->total.us() : 0;
      out += fmt::format("{:<40} {:>12.3f} {:>12.3f} {:>10}\n", name, x, y, ratio(x, y));
    }
  }
  return out;
}

}  // namespace neuronsim::traces
