// ncsim trace summary|diff: read trace files back.
#include <iostream>

#include "commands.h"
#include "neuronsim/traces/summary.h"
#include "neuronsim/traces/trace_reader.h"

namespace ncsim {

using namespace neuronsim;

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "summarise or compare trace files");
  cmd->require_subcommand(1);
  struct Args {
    std::string a, b;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* sum = cmd->add_subcommand("summary", "per-engine utilisation, bottleneck, FLOP/s, bytes");
  sum->add_option("trace", args->a, "trace JSON")->required();
  sum->add_flag("--json", args->json, "print JSON");
  sum->callback([args] {
    const auto s = traces::summarize_file(args->a);
    std::cout << (args->json ? s.to_json().dump(2) + "\n" : traces::format_summary(s));
  });
  auto* diff =
      cmd->add_subcommand("diff", "compare two runs engine by engine and kernel by kernel");
  diff->add_option("a", args->a, "trace A")->required();
  diff->add_option("b", args->b, "trace B")->required();
  diff->add_flag("--json", args->json, "print JSON");
  diff->callback([args] {
    const auto sa = traces::summarize_file(args->a);
    const auto sb = traces::summarize_file(args->b);
    std::cout << (args->json ? traces::diff_json(sa.to_json(), sb.to_json()).dump(2) + "\n"
                             : traces::format_diff(sa, sb, args->a, args->b));
  });
}

}  // namespace ncsim
