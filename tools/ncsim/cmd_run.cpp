// ncsim run: run a program file (serialised instruction stream) and print the summary.
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "commands.h"
#include "hbm_regions.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/program_json.h"
#include "session.h"

namespace ncsim {

using namespace neuronsim;

void add_run_command(CLI::App& app) {
  struct Args {
    DeviceArgs device;
    std::string program, trace, summary_json, stats_json;
    uint32_t core = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("run", "run a program file on a simulated NeuronCore");
  cmd->add_option("program", args->program, "program JSON (see device_model/docs/ISA.md)")
      ->required();
  args->device.add_to(*cmd);
  cmd->add_option("--trace", args->trace, "write a Chrome/Perfetto trace here");
  cmd->add_option("--summary-json", args->summary_json, "write the summary as JSON here");
  cmd->add_option("--stats-json", args->stats_json,
                  "write every device statistic (per engine, per queue, with units) here");
  cmd->add_option("--core", args->core, "NeuronCore to run on")->capture_default_str();
  cmd->callback([args] {
    std::ifstream in(args->program);
    if (!in) throw device_model::Error("cannot open program file '" + args->program + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::parse_error& e) {
      throw device_model::ProgramFormatError(args->program + ": not valid JSON: " + e.what());
    }
    const device_model::Program program = device_model::program_from_json(j);
    const auto regions = read_region_io(j);
    Session session(args->device, args->core + 1, args->trace);
    initialise_regions(regions, session.device());
    const auto result = session.device().run(args->core, program);
    const auto summary = session.finish();
    std::cout << fmt::format("program {} ({} instructions) on nc{}: {:.3f} us simulated\n\n",
                             program.name, program.instruction_count(), args->core,
                             result.duration().us());
    std::cout << traces::format_summary(summary);
    if (session.device().mode() != device_model::ExecMode::kTiming) {
      const std::string outputs = describe_outputs(regions, session.device());
      if (!outputs.empty()) std::cout << "\n" << outputs;
    }
    if (!args->summary_json.empty())
      std::ofstream(args->summary_json) << summary.to_json().dump(2) << "\n";
    if (!args->stats_json.empty()) {
      std::ofstream(args->stats_json) << session.device().stats().to_json().dump(2) << "\n";
    }
    if (!args->trace.empty()) std::cout << "\ntrace written to " << args->trace << "\n";
  });
}

}  // namespace ncsim
