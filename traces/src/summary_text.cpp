#include <fmt/format.h>

#include "neuronsim/traces/summary.h"

namespace neuronsim::traces {
namespace {

std::string time_str(double ns) {
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns * 1e-6);
  if (ns >= 1e3) return fmt::format("{:.3f} us", ns * 1e-3);
  return fmt::format("{:.1f} ns", ns);
}

std::string bytes_str(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

std::string of_peak(double achieved, double peak) {
  return peak > 0 ? fmt::format("{:.1f}% of peak {:.2f}", 100.0 * achieved / peak, peak)
                  : "peak n/a";
}

}  // namespace

std::string format_summary(const Summary& s) {
  std::string out;
  out += fmt::format("simulated time     {}  ({} .. {}){}\n", time_str(s.duration().ns()),
                     time_str(s.begin.ns()), time_str(s.end.ns()),
                     s.preset.empty() ? "" : "  preset " + s.preset);
  out += fmt::format("bottleneck         {} ({:.1f}% busy)\n",
                     s.bottleneck.empty() ? "-" : s.bottleneck, 100 * s.bottleneck_utilisation);
  out += fmt::format("TensorE FLOP/s     {:.2f} TFLOP/s ({})\n", s.achieved_flops_per_s * 1e-12,
                     of_peak(s.achieved_flops_per_s * 1e-12, s.peak_flops_per_s * 1e-12));
  out += fmt::format("HBM bandwidth      {:.1f} GB/s ({})\n", s.achieved_hbm_bytes_per_s * 1e-9,
                     of_peak(s.achieved_hbm_bytes_per_s * 1e-9, s.peak_hbm_bytes_per_s * 1e-9));
  out += fmt::format("bytes moved        {} by DMA, {} to/from HBM\n", bytes_str(s.dma_bytes),
                     bytes_str(s.hbm_bytes));
  out += fmt::format("\n{:<6} {:<24} {:>12} {:>14} {:>8}\n", "core", "engine", "instructions",
                     "busy", "util");
  for (const auto& e : s.engines) {
    out += fmt::format("{:<6} {:<24} {:>12} {:>14} {:>7.1f}%\n", e.process, e.engine,
                       e.instructions, time_str(e.busy.ns()), 100 * e.utilisation);
  }
  if (!s.kernels.empty()) {
    out += fmt::format("\n{:<40} {:>8} {:>14}\n", "kernel", "launches", "total");
    for (const auto& k : s.kernels) {
      out += fmt::format("{:<40} {:>8} {:>14}\n", k.name, k.launches, time_str(k.total.ns()));
    }
  }
  if (!s.graph_launches.empty()) {
    out += fmt::format("\n{:<40} {:>8} {:>14}\n", "compiled graph launch", "launches", "total");
    for (const auto& g : s.graph_launches) {
      out += fmt::format("{:<40} {:>8} {:>14}\n", g.name, g.launches, time_str(g.total.ns()));
    }
  }
  return out;
}

}  // namespace neuronsim::traces
