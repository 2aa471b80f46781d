// softmax and log_softmax (and their backward) over one dim: the kernel library's softmax.
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/softmax.h"
#include "neuronsim/kernels/spmd.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

}  // namespace

NativeOpTable softmax_ops() {
  NativeOpTable ops;
  for (const char* n : {"aten::_softmax", "aten::_log_softmax"}) {
    const bool log = std::string(n) == "aten::_log_softmax";
    ops.push_back({n, [log](const OpInvocation& inv) {
                     const at::Tensor in = inv.tensor(0);
                     return Programs{kernels::build_softmax_grid(
                         inv.name, inv.describe(in), inv.describe(inv.outputs.at(0)),
                         inv.arg("dim").toInt(), log, inv.core(), inv.grid)};
                   }});
  }
  for (const char* n : {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"}) {
    const bool log = std::string(n) == "aten::_log_softmax_backward_data";
    ops.push_back({n, [log](const OpInvocation& inv) {
                     return Programs{kernels::build_softmax_backward_grid(
                         inv.name, inv.describe(inv.tensor(0)), inv.describe(inv.tensor(1)),
                         inv.describe(inv.outputs.at(0)), inv.arg("dim").toInt(), log, inv.core(),
                         inv.grid)};
                   }});
  }
  return ops;
}

}  // namespace neuronsim::backend
