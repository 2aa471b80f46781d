// ncsim scalesim: the inputs SCALE-Sim v2 needs to simulate a GEMM on the preset's PE array
// (topology CSV, config INI), and what neuronsim predicts for the same GEMM in both TensorE
// timing modes, so the two simulators can be compared (HARDWARE.md section 7).
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "neuronsim/device/config.h"
#include "neuronsim/device/params.h"

namespace ncsim {

using namespace neuronsim;

void add_scalesim_command(CLI::App& app) {
  struct Args {
    std::string preset = "trn1", out = "out/scalesim";
    uint32_t m = 1024, k = 1024, n = 1024;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("scalesim", "export a GEMM for SCALE-Sim v2 and compare cycles");
  cmd->add_option("--preset", a->preset)->capture_default_str();
  cmd->add_option("--m", a->m, "rows of A (SCALE-Sim M: streamed rows)")->capture_default_str();
  cmd->add_option("--k", a->k, "contraction (SCALE-Sim K)")->capture_default_str();
  cmd->add_option("--n", a->n, "columns of B (SCALE-Sim N: filters)")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "directory for topology.csv and scalesim.cfg")
      ->capture_default_str();
  cmd->callback([a] {
    const auto chip = device::parse_chip_params(device::Config::load(a->preset));
    const auto& t = chip.core.tensor;
    std::filesystem::create_directories(a->out);
    // neuronsim's GEMM: C[m, n] = A[m, k] B[k, n] with A^T stationary (m on the PE columns) and
    // B moving (n streamed). In SCALE-Sim's names (HARDWARE.md 7): K = k, N (filters) = m,
    // M (streamed rows) = n. Topology: "Layer Name, M, N, K," with a header, rows ending in ','.
    std::ofstream(a->out + "/topology.csv") << "Layer Name, M, N, K,\n"
                                            << fmt::format("gemm, {}, {}, {},\n", a->n, a->m, a->k);
    const uint64_t sram_kb =
        uint64_t{chip.core.sbuf.partitions} * chip.core.sbuf.partition_bytes / 3 / 1024;
    std::ofstream(a->out + "/scalesim.cfg") << fmt::format(
        "[general]\nrun_name = neuronsim_{}\n\n[architecture_presets]\nArrayHeight : {}\n"
        "ArrayWidth : {}\nIfmapSramSzkB : {}\nFilterSramSzkB : {}\nOfmapSramSzkB : {}\n"
        "IfmapOffset : 0\nFilterOffset : 10000000\nOfmapOffset : 20000000\nBandwidth : 10\n"
        "Dataflow : ws\nMemoryBanks : 1\n\n[run_presets]\nInterfaceBandwidth : CALC\n",
        a->preset, t.rows, t.columns, sram_kb, sram_kb,
        uint64_t{chip.core.psum.partitions} * chip.core.psum.partition_bytes / 1024);
    const uint64_t row_folds = (a->k + t.rows - 1) / t.rows,
                   col_folds = (a->m + t.columns - 1) / t.columns;
    const double folds = static_cast<double>(row_folds * col_folds);
    // SCALE-Sim streams all n rows through each fold once.
    const double scalesim = folds * (2.0 * t.rows + t.columns + a->n - 2.0);
    // neuronsim issues one matmul per fold and moving tile of <= moving_free_max columns.
    double neuroncore = 0, scalesim_mode = 0;
    for (uint64_t n0 = 0; n0 < a->n; n0 += t.moving_free_max) {
      const double nw = std::min<double>(t.moving_free_max, a->n - n0);
      neuroncore += folds * std::max(std::min<double>(t.mm_min_ii_cycles, t.columns), nw);
      scalesim_mode += folds * (2.0 * t.rows + t.columns + nw - 2.0);
    }
    std::cout << fmt::format(
        "wrote {0}/topology.csv and {0}/scalesim.cfg ({1}x{2} PE array, weight stationary)\n"
        "GEMM m={3} k={4} n={5} (SCALE-Sim M={5} N={3} K={4}): {6} x {7} folds\n"
        "  SCALE-Sim v2 WS, sum over folds of 2R + C + T - 2:        {8:.0f} TensorE cycles\n"
        "  neuronsim tensor.timing_mode=scalesim (per {9}-wide tile): {10:.0f} TensorE cycles\n"
        "  neuronsim tensor.timing_mode=neuroncore (pipelined MM):    {11:.0f} TensorE cycles\n"
        "Compare with SCALE-Sim's COMPUTE_REPORT.csv 'Total Cycles' after\n"
        "  scale-sim -c {0}/scalesim.cfg -t {0}/topology.csv\n",
        a->out, t.rows, t.columns, a->m, a->k, a->n, row_folds, col_folds, scalesim,
        t.moving_free_max, scalesim_mode, neuroncore);
  });
}

}  // namespace ncsim
