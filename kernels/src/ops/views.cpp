// Views: metadata only. Eagerly they never reach the op library (composite views over the
// device's as_strided); in compiled graphs the output's layout is its value's meta.
#include "neuronsim/kernels/graph/lowerer.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {

std::vector<OpRule> view_rules() {
  std::vector<OpRule> ops;
  for (const char* name :
       {"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::permute", "aten::transpose",
        "aten::t", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::slice",
        "aten::select", "aten::alias", "aten::detach", "aten::as_strided", "aten::view_as",
        "aten::expand_as", "aten::unfold", "aten::diagonal"}) {
    OpRule r;
    r.name = name;
    r.metadata_only = true;
    r.lower = [](graph::Lowerer& l) {
      const graph::Node& n = l.node();
      const graph::Arg& self = n.args.at(0).second;
      if (self.kind != graph::Arg::Kind::kTensor) throw graph::NotLowered("view of a non-tensor");
      l.view(self.value, n.outputs.at(0), self.value);
    };
    ops.push_back(std::move(r));
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
