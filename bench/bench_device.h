#pragma once
// The benchmark process's one simulated device and the workloads the benchmarks run on it.
//
// SystemC elaborates once per process, so every benchmark shares one trn1 Device (one NeuronCore),
// created on first use and switched between timing-only and full mode with set_mode(). Programs
// run back to back; the simulated clock only moves forward, which does not affect the results.
#include <cstdint>
#include <map>
#include <string>

#include "neuronsim/device_model/device.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/dense_layer_norm.h"

namespace neuronsim::bench {

/// trn1's base clock (the ScalarE/GpSimdE clock, 1.4 GHz): simulated time x this = the
/// "simulated NeuronCore cycles" the benchmarks report.
inline constexpr double kTrn1BaseClockHz = 1.4e9;
/// The goal for timing-only simulation speed.
inline constexpr double kInstructionsPerSecondGoal = 1e6;

/// The shared device (trn1 preset, one NeuronCore, no trace sink), created on first call.
device_model::Device& bench_device();
/// Destroys the device before static destruction (called by main after the benchmarks).
void shutdown_bench_device();

/// A GEMM as the demo runs it: bf16 in and out, bias add on VectorE, GELU on ScalarE.
struct GemmWorkload {
  kernels::GemmSpec spec;
  kernels::GemmAddresses addr;
  device_model::Program program;
};
/// Builds the program for m = k = n = size. With `fill_inputs`, writes N(0, 1) inputs to HBM
/// (needed once before a full-mode run).
GemmWorkload make_gemm(uint32_t size, bool fill_inputs);

struct LayerNormWorkload {
  kernels::LayerNormSpec spec;
  kernels::LayerNormAddresses addr;
  device_model::Program program;
};
LayerNormWorkload make_layernorm(uint32_t rows, uint32_t dim, bool fill_inputs);

/// What one benchmark measured, kept for the summary main() prints after all benchmarks ran.
struct Measurement {
  std::string mode;
  uint64_t instructions = 0;     // per program run (data + semaphore instructions)
  double host_seconds = 0;       // per program run (validation + simulation)
  double sim_seconds = 0;        // simulated time per program run
  double reference_seconds = 0;  // host reference doing the same math (full mode), 0 if none
  std::string reference_name;
};
std::map<std::string, Measurement>& measurements();

}  // namespace neuronsim::bench
