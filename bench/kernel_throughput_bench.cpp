// Simulation speed of the kernel library's GEMM and layernorm on one simulated trn1 NeuronCore:
// simulated instructions and simulated cycles per host second, timing-only and full mode.
// Counters (see bench/README.md):
//   instr/s       program instructions (data + semaphore) simulated per host CPU second
//   cycles/s      simulated time x 1.4 GHz (trn1 base clock) per host CPU second
//   sim_us        simulated time of one program run
//   goal_x        timing mode: instr/s / 1e6 (the goal; >= 1 means met)
//   budget_x      GEMM 1024^3: host CPU seconds per run / 1 s (the budget; << 1 means met)
//   ref_ms        full mode: host ms of plain fp32 host code doing the same math (Eigen)
//   x_ref         full mode: neuronsim host time / ref_ms (how much slower than plain host math)
//   x_naive       full-mode GEMM: neuronsim host time / a straightforward i-k-j fp32 loop
#include <benchmark/benchmark.h>

#include <functional>
#include <string>

#include "bench_device.h"
#include "host_reference.h"

namespace neuronsim::bench {
namespace {

using device_model::ExecMode;

struct Reference {
  std::string name;
  double seconds = 0;
};

// Runs `program` once per iteration on core 0 in `mode` (validation + simulation, no trace
// sink) and reports the counters. `references` (full mode) are plain host code timed once per
// process, after the measured loop.
void run_program(benchmark::State& state, const std::string& name, ExecMode mode,
                 const device_model::Program& program, bool gemm_budget,
                 const std::function<std::vector<Reference>()>& references = {}) {
  device_model::Device& dev = bench_device();
  dev.set_mode(mode);
  double host = 0, sim = 0;
  uint64_t runs = 0;
  const uint64_t instructions = program.instruction_count();
  for (auto _ : state) {
    const double t0 = cpu_seconds();
    const device_model::RunResult r = dev.run(0, program);
    host += cpu_seconds() - t0;
    sim += r.duration().seconds();
    ++runs;
  }
  const double n = static_cast<double>(runs);
  state.counters["instr/s"] =
      benchmark::Counter(static_cast<double>(instructions) * n, benchmark::Counter::kIsRate);
  state.counters["cycles/s"] =
      benchmark::Counter(sim * kTrn1BaseClockHz, benchmark::Counter::kIsRate);
  state.counters["sim_us"] = sim / n * 1e6;
  state.counters["instr"] = static_cast<double>(instructions);

  Measurement m;
  m.mode = std::string(device_model::exec_mode_name(mode));
  m.instructions = instructions;
  m.host_seconds = host / n;
  m.sim_seconds = sim / n;
  if (mode == ExecMode::kTiming) {
    state.counters["goal_x"] =
        static_cast<double>(instructions) / m.host_seconds / kInstructionsPerSecondGoal;
  }
  if (gemm_budget) state.counters["budget_x"] = m.host_seconds / 1.0;
  if (references) {
    const std::vector<Reference> refs = references();
    for (size_t i = 0; i < refs.size(); ++i) {
      const std::string suffix = i == 0 ? "ref" : refs[i].name;
      if (i == 0) state.counters["ref_ms"] = refs[i].seconds * 1e3;
      state.counters["x_" + suffix] = m.host_seconds / refs[i].seconds;
    }
    if (!refs.empty()) {
      m.reference_seconds = refs[0].seconds;
      m.reference_name = refs[0].name;
    }
  }
  measurements()[name + " " + m.mode] = m;
}

const GemmWorkload& gemm1024() {
  static const GemmWorkload w = make_gemm(1024, /*fill_inputs=*/true);
  return w;
}
const GemmWorkload& gemm4096() {
  static const GemmWorkload w = make_gemm(4096, /*fill_inputs=*/false);
  return w;
}
const LayerNormWorkload& layernorm2048() {
  static const LayerNormWorkload w = make_layernorm(2048, 1024, /*fill_inputs=*/true);
  return w;
}

std::vector<Reference> gemm1024_references() {
  static const std::vector<Reference> refs = {
      {"eigen", time_reference([] { return eigen_gemm_bias_gelu(1024); })},
      {"naive", time_reference([] { return naive_gemm_bias_gelu(1024); })}};
  return refs;
}
std::vector<Reference> layernorm2048_references() {
  static const std::vector<Reference> refs = {
      {"eigen", time_reference([] { return eigen_layernorm(2048, 1024); })}};
  return refs;
}

void BM_Gemm1024_Timing(benchmark::State& state) {
  run_program(state, "gemm_1024^3", ExecMode::kTiming, gemm1024().program, true);
}
void BM_LayerNorm2048x1024_Timing(benchmark::State& state) {
  run_program(state, "layernorm_2048x1024", ExecMode::kTiming, layernorm2048().program, false);
}
void BM_Gemm4096_Timing(benchmark::State& state) {
  run_program(state, "gemm_4096^3", ExecMode::kTiming, gemm4096().program, false);
}
void BM_Gemm1024_Full(benchmark::State& state) {
  run_program(state, "gemm_1024^3", ExecMode::kFull, gemm1024().program, true, gemm1024_references);
}
void BM_LayerNorm2048x1024_Full(benchmark::State& state) {
  run_program(state, "layernorm_2048x1024", ExecMode::kFull, layernorm2048().program, false,
              layernorm2048_references);
}

// The host references on their own, for reading the ratios.
void BM_HostRef_EigenGemm1024(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(eigen_gemm_bias_gelu(1024));
}
void BM_HostRef_NaiveGemm1024(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(naive_gemm_bias_gelu(1024));
}
void BM_HostRef_EigenLayerNorm2048x1024(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(eigen_layernorm(2048, 1024));
}

}  // namespace

// Registration order is execution order: timing-only first, then full mode, then references.
// Rates are per CPU second (Google Benchmark's default): the "CPU" column, and the same as wall
// time on an idle machine.
#define NEURONSIM_BENCH(fn) BENCHMARK(fn)->Unit(benchmark::kMillisecond)
NEURONSIM_BENCH(BM_Gemm1024_Timing);
NEURONSIM_BENCH(BM_LayerNorm2048x1024_Timing);
NEURONSIM_BENCH(BM_Gemm4096_Timing);
NEURONSIM_BENCH(BM_Gemm1024_Full);
NEURONSIM_BENCH(BM_LayerNorm2048x1024_Full);
NEURONSIM_BENCH(BM_HostRef_EigenGemm1024);
NEURONSIM_BENCH(BM_HostRef_NaiveGemm1024);
NEURONSIM_BENCH(BM_HostRef_EigenLayerNorm2048x1024);

}  // namespace neuronsim::bench
