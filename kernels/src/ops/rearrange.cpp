// Reversed and rotated copies (flip, roll: DMA only, kernels/rearrange.h) and index-generated
// tensors (eye, linspace, logspace: kernels/generators.h).
#include <optional>

#include "neuronsim/kernels/generators.h"
#include "neuronsim/kernels/rearrange.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

// A contiguous tensor as one dim (roll without dims rotates the flattened tensor).
TensorDesc flat(TensorDesc d) {
  d.sizes = {static_cast<int64_t>(d.numel())};
  d.strides = {1};
  return d;
}

// A linspace/logspace end point: a number, or a host scalar tensor (its value is part of the
// program key); device tensors would make the program depend on device data.
std::optional<double> end_point(const OpCall& call, const char* name) {
  if (call.kind(name) == ArgKind::kTensor) {
    const TensorArg t = call.tensor(name);
    if (t.on_device || t.numel() != 1 || is_complex(t.type)) return std::nullopt;
  }
  return call.number(name, 0.0);
}

// Floating outputs only: integer linspace truncates values computed in double on the CPU.
bool linspace_supported(const OpCall& call, bool log) {
  const TensorArg out = call.num_outputs() ? call.output(0) : call.tensor(call.num_args() - 1);
  if (!out.defined || !out.is_floating() || out.dim() > 1) return false;
  if (!end_point(call, "start") || !end_point(call, "end")) return false;
  return !log || call.number("base", 10.0) > 0.0;
}

Programs linspace(const OpCall& call, bool log) {
  const float base = log ? static_cast<float>(call.number("base", 10.0)) : 0.0f;
  return {build_linspace(call.name(), call.output(0).desc,
                         static_cast<float>(*end_point(call, "start")),
                         static_cast<float>(*end_point(call, "end")), base, call.core())};
}

}  // namespace

std::vector<OpRule> rearrange_rules() {
  std::vector<OpRule> ops;
  ops.push_back(make_rule("aten::flip", [](const OpCall& call) {
    return Programs{build_flip(call.name(), call.tensor(0).desc, call.output(0).desc,
                               call.ints("dims"), call.core())};
  }));
  ops.push_back(make_rule(
      "aten::roll",
      [](const OpCall& call) {
        TensorDesc in = call.tensor(0).desc, out = call.output(0).desc;
        std::vector<int64_t> dims = call.ints("dims");
        if (dims.empty()) {
          in = flat(in);
          out = flat(out);
          dims = {0};
        }
        return Programs{build_roll(call.name(), in, out, call.ints("shifts"), dims, call.core())};
      },
      [](const OpCall& call) {
        // Without dims the flattened tensor rolls: both sides must be one run.
        const TensorArg in = call.tensor(0);
        if (!in.defined || !call.ints("dims").empty()) return true;
        return in.is_contiguous() && call.ints("shifts").size() == 1;
      }));
  ops.push_back(make_rule("aten::eye", [](const OpCall& call) {
    return Programs{build_eye(call.name(), call.output(0).desc, call.core())};
  }));
  ops.push_back(make_rule(
      "aten::linspace", [](const OpCall& call) { return linspace(call, false); },
      [](const OpCall& call) { return linspace_supported(call, false); }));
  ops.push_back(make_rule(
      "aten::logspace", [](const OpCall& call) { return linspace(call, true); },
      [](const OpCall& call) { return linspace_supported(call, true); }));
  return ops;
}

}  // namespace neuronsim::kernels::ops
