// neuronsim_bench: runs the registered benchmarks, then prints one summary of what they measured,
// with the goals as ratios taken from this run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "bench_device.h"

namespace neuronsim::bench {
namespace {

void print_summary() {
  const auto& ms = measurements();
  if (ms.empty()) return;
  std::printf(
      "\nneuronsim_bench summary: trn1 preset, 1 NeuronCore, no trace sink; host time is "
      "process CPU time.\nSimulated cycles = simulated time x %.1f GHz (trn1 base clock). "
      "Instructions count every program\ninstruction, semaphore waits/signals included.\n\n",
      kTrn1BaseClockHz * 1e-9);
  std::printf("%-22s %-7s %8s %12s %12s %11s %15s\n", "program", "mode", "instr", "host ms/run",
              "sim us/run", "M instr/s", "M sim cycles/s");
  for (const auto& [key, m] : ms) {
    const std::string name = key.substr(0, key.find(' '));
    std::printf("%-22s %-7s %8llu %12.3f %12.3f %11.3f %15.1f\n", name.c_str(), m.mode.c_str(),
                static_cast<unsigned long long>(m.instructions), m.host_seconds * 1e3,
                m.sim_seconds * 1e6, m.instructions / m.host_seconds * 1e-6,
                m.sim_seconds * kTrn1BaseClockHz / m.host_seconds * 1e-6);
  }

  std::printf("\nGoals (ratios from this run):\n");
  double worst = -1;
  std::string worst_name;
  for (const auto& [key, m] : ms) {
    if (m.mode != "timing") continue;
    const double ratio = m.instructions / m.host_seconds / kInstructionsPerSecondGoal;
    std::printf("  timing-only >= 1 M instr/s  %-30s %8.3f M instr/s = %6.2fx goal\n", key.c_str(),
                ratio, ratio);
    if (worst < 0 || ratio < worst) worst = ratio, worst_name = key;
  }
  if (worst >= 0) {
    std::printf("  -> %s (lowest: %s at %.2fx)\n", worst >= 1.0 ? "MET" : "NOT MET",
                worst_name.c_str(), worst);
  }
  for (const char* mode : {"timing", "full"}) {
    auto it = ms.find(std::string("gemm_1024^3 ") + mode);
    if (it == ms.end()) continue;
    const double s = it->second.host_seconds;
    std::printf("  1024^3 GEMM well under 1 s  %-30s %8.4f s = %.3g of 1 s -> %s\n",
                it->first.c_str(), s, s / 1.0, s < 0.5 ? "MET (< 0.5 s)" : "NOT MET (>= 0.5 s)");
  }
  for (const auto& [key, m] : ms) {
    if (m.reference_seconds <= 0) continue;
    std::printf("  full mode vs plain host code %-29s %8.4f s vs %s %.4f s = %.1fx\n", key.c_str(),
                m.host_seconds, m.reference_name.c_str(), m.reference_seconds,
                m.host_seconds / m.reference_seconds);
  }
}

}  // namespace
}  // namespace neuronsim::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("neuronsim.preset", "trn1");
  benchmark::AddCustomContext("neuronsim.sim_cycle_clock_hz", "1.4e9");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  neuronsim::bench::print_summary();
  neuronsim::bench::shutdown_bench_device();
  return 0;
}
