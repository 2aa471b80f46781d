// ncsim scalesim: a GEMM in SCALE-Sim's terms (M x K times K x N, weight stationary on the
// preset's PE array). Writes the topology, config and layout files SCALE-Sim 3 needs, then runs
// the GEMM in SCALE-Sim's dataflow (kernels/scalesim_gemm.h) through the device model with
// tensor.timing_mode=scalesim and prints TensorE's simulated cycle count next to SCALE-Sim's
// fold formula, so SCALE-Sim's own "Total Cycles" can be compared with both (HARDWARE.md 7).
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/device.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/kernels/scalesim_gemm.h"

namespace ncsim {

using namespace neuronsim;

void add_scalesim_command(CLI::App& app) {
  struct Args {
    std::string preset = "trn1", out = "out/scalesim", dtype = "bf16";
    std::vector<std::string> overrides;
    uint32_t m = 1024, k = 1024, n = 1024;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "scalesim", "run a GEMM in SCALE-Sim's weight-stationary mode and export it for SCALE-Sim");
  cmd->add_option("--preset", a->preset)->capture_default_str();
  cmd->add_option("--set", a->overrides, "override a preset parameter (key=value)");
  cmd->add_option("--m", a->m, "SCALE-Sim M: rows of A and C, streamed through the array")
      ->capture_default_str();
  cmd->add_option("--n", a->n, "SCALE-Sim N: columns of B and C (filters, the stationary side)")
      ->capture_default_str();
  cmd->add_option("--k", a->k, "SCALE-Sim K: the contraction")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "input and output dtype")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "directory for topology.csv, scalesim.cfg, layout.csv")
      ->capture_default_str();
  cmd->callback([a] {
    device_model::Config config = device_model::Config::load(a->preset);
    config.apply_overrides(a->overrides);
    config.apply_overrides({"tensor.timing_mode=scalesim"});
    const auto dtype = device_model::parse_dtype(a->dtype);
    if (!dtype) throw device_model::Error("unknown dtype '" + a->dtype + "'");
    device_model::DeviceOptions opts;
    opts.cores = 1;
    opts.mode = device_model::ExecMode::kTiming;
    device_model::Device dev(config, opts);
    const auto& t = dev.params().core.tensor;

    // SCALE-Sim 3.0.0 needs, even for a GEMM, a [layout] and a [sparsity] section and a layout
    // file (its values unused with custom layouts off); its topology rows end in ','.
    std::filesystem::create_directories(a->out);
    std::ofstream(a->out + "/topology.csv") << "Layer Name, M, N, K,\n"
                                            << fmt::format("gemm, {}, {}, {},\n", a->m, a->n, a->k);
    const auto& core = dev.params().core;
    const uint64_t sram_kb = uint64_t{core.sbuf.partitions} * core.sbuf.partition_bytes / 3 / 1024;
    std::ofstream(a->out + "/scalesim.cfg") << fmt::format(
        "[general]\nrun_name = neuronsim_{}\n\n[architecture_presets]\nArrayHeight : {}\n"
        "ArrayWidth : {}\nIfmapSramSzkB : {}\nFilterSramSzkB : {}\nOfmapSramSzkB : {}\n"
        "IfmapOffset : 0\nFilterOffset : 10000000\nOfmapOffset : 20000000\nBandwidth : 10\n"
        "Dataflow : ws\nMemoryBanks : 1\nReadRequestBuffer : 32\nWriteRequestBuffer : 32\n\n"
        "[layout]\nIfmapCustomLayout : False\nFilterCustomLayout : False\n"
        "IfmapSRAMBankBandwidth : 10\nIfmapSRAMBankNum : 10\nIfmapSRAMBankPort : 2\n"
        "FilterSRAMBankBandwidth : 10\nFilterSRAMBankNum : 10\nFilterSRAMBankPort : 2\n\n"
        "[run_presets]\nInterfaceBandwidth : CALC\nUseRamulatorTrace : False\n\n"
        "[sparsity]\nSparsitySupport : false\nSparseRep : ellpack_block\n"
        "OptimizedMapping : false\nBlockSize : 8\nRandomNumberGeneratorSeed : 40\n",
        a->preset, t.rows, t.columns, sram_kb, sram_kb,
        uint64_t{core.psum.partitions} * core.psum.partition_bytes / 1024);
    std::ofstream(a->out + "/layout.csv")
        << "Layer name, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s,\n"
        << "gemm, 1, 1, 1, 1, 1, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 3,\n";

    kernels::GemmSpec g;
    g.m = a->m, g.k = a->k, g.n = a->n;
    g.in_dtype = g.out_dtype = *dtype;
    const uint64_t es = device_model::dtype_size(*dtype);
    auto align = [](uint64_t x) { return (x + 4095) / 4096 * 4096; };
    kernels::GemmAddresses ad;
    ad.b = align(uint64_t{g.k} * g.m * es);
    ad.c = ad.b + align(uint64_t{g.k} * g.n * es);
    const device_model::Program program = kernels::build_gemm_weight_stationary(g, ad, core);
    const auto run = dev.run(0, program);
    const uint64_t cycles = static_cast<uint64_t>(dev.stats().value("nc0.tensor.busy_cycles"));

    const uint64_t row_folds = (a->k + t.rows - 1) / t.rows,
                   col_folds = (a->n + t.columns - 1) / t.columns;
    const uint64_t formula = row_folds * col_folds * (2ull * t.rows + t.columns + a->m - 2) - 1;
    std::cout << fmt::format(
        "wrote {0}/topology.csv, {0}/scalesim.cfg, {0}/layout.csv ({1}x{2} PE array, weight "
        "stationary)\n"
        "GEMM M={3} N={4} K={5} (C[M, N] = A[M, K] B[K, N]; B stationary, A's M rows "
        "streamed): {6} x {7} folds\n"
        "  simulated, tensor.timing_mode=scalesim:       {8} TensorE cycles ({9}: {10} "
        "instructions, {11:.3f} us)\n"
        "  SCALE-Sim WS, folds x (2R + C + M - 2) - 1:    {12} cycles\n"
        "Compare with SCALE-Sim 3.0.0's COMPUTE_REPORT.csv 'Total Cycles' after\n"
        "  python -m scalesim.scale -c {0}/scalesim.cfg -t {0}/topology.csv -l {0}/layout.csv "
        "-p {0}/run -i gemm\n",
        a->out, t.rows, t.columns, a->m, a->n, a->k, row_folds, col_folds, cycles, program.name,
        program.instruction_count(), run.duration().us(), formula);
  });
}

}  // namespace ncsim
