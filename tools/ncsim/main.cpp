// ncsim: the command-line front end of the neuronsim device model.
#include <cstdio>
#include <exception>

#include "commands.h"

namespace ncsim {

void DeviceArgs::add_to(CLI::App& cmd) {
  cmd.add_option("--preset", preset, "built-in preset (trn1, trn2) or a preset JSON file")
      ->capture_default_str();
  cmd.add_option("--set", overrides, "override a preset value, key=value (repeatable)");
  cmd.add_option("--mode", mode, "full (data and time), timing (time only), functional (data only)")
      ->check(CLI::IsMember({"full", "timing", "functional"}))
      ->capture_default_str();
}

}  // namespace ncsim

int main(int argc, char** argv) {
  CLI::App app{"ncsim - run programs on the simulated Trainium NeuronCore (neuronsim)"};
  app.require_subcommand(1);
  ncsim::add_run_command(app);
  ncsim::add_kernel_command(app);
  ncsim::add_demo_command(app);
  ncsim::add_trace_command(app);
  ncsim::add_presets_command(app);
  ncsim::add_scalesim_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncsim: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
