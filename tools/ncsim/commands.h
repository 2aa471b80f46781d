#pragma once
// ncsim: run programs on the simulated NeuronCore and read traces. One file per subcommand.
#include <CLI/CLI.hpp>

namespace ncsim {

void add_run_command(CLI::App& app);
void add_kernel_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_presets_command(CLI::App& app);
void add_scalesim_command(CLI::App& app);

/// Options every simulating command shares.
struct DeviceArgs {
  std::string preset = "trn1";
  std::vector<std::string> overrides;
  std::string mode = "full";
  void add_to(CLI::App& cmd);
};

}  // namespace ncsim
