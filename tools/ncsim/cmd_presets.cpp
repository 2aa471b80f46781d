// ncsim presets list|show|keys
#include <iostream>

#include "commands.h"
#include "neuronsim/device_model/config.h"

namespace ncsim {

using namespace neuronsim;

void add_presets_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("presets", "list and show hardware presets");
  cmd->require_subcommand(1);
  auto name = std::make_shared<std::string>();
  cmd->add_subcommand("list", "built-in presets")->callback([] {
    for (const auto& n : device_model::Config::builtin_names()) {
      const auto c = device_model::Config::load(n);
      std::cout << n << "  " << c.tree()["preset"].value("description", "") << "\n";
    }
  });
  auto* show = cmd->add_subcommand("show", "every parameter with its value and source");
  show->add_option("preset", *name)->required();
  show->callback([name] {
    const auto c = device_model::Config::load(*name);
    for (const auto& k : c.keys()) {
      const nlohmann::json* node = &c.tree();
      size_t start = 0;
      while (true) {
        const size_t dot = k.find('.', start);
        node =
            &(*node)[k.substr(start, dot == std::string::npos ? std::string::npos : dot - start)];
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
      std::cout << k << " = " << (*node)["value"].dump()
                << "\n    source: " << (*node)["source"].get<std::string>() << "\n";
    }
  });
}

}  // namespace ncsim
