// Copies between device tensors the dispatcher sees as ops: clone, cat, tril/triu.
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/spmd.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

}  // namespace

NativeOpTable copy_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::clone", [](const OpInvocation& inv) {
                   return Programs{kernels::build_copy_grid(inv.name, inv.describe(inv.tensor(0)),
                                                            inv.describe(inv.outputs.at(0)),
                                                            inv.core(), inv.grid)};
                 }});
  ops.push_back({"aten::cat", [](const OpInvocation& inv) {
                   const at::Tensor out = inv.outputs.at(0);
                   int64_t dim = inv.arg("dim").toInt();
                   if (dim < 0) dim += out.dim();
                   std::vector<std::pair<kernels::TensorDesc, kernels::TensorDesc>> pairs;
                   int64_t off = 0;
                   for (const at::Tensor& t : inv.arg("tensors").toTensorList()) {
                     if (t.dim() == 1 && t.numel() == 0 && out.dim() > 1)
                       continue;  // legacy empty inputs
                     if (t.numel())
                       pairs.emplace_back(inv.describe(t),
                                          inv.describe(out.narrow(dim, off, t.size(dim))));
                     off += t.size(dim);
                   }
                   return Programs{kernels::build_copies(inv.name, pairs, inv.core())};
                 }});
  for (const char* n : {"aten::tril", "aten::triu"}) {
    const bool lower = std::string(n) == "aten::tril";
    ops.push_back({n,
                   [lower](const OpInvocation& inv) {
                     return Programs{kernels::build_triangle(
                         inv.name, inv.describe(inv.tensor(0)), inv.describe(inv.outputs.at(0)),
                         inv.arg("diagonal").toInt(), lower, inv.core())};
                   },
                   [](const OpInvocation& inv) { return inv.tensor(0).dim() >= 2; }});
  }
  return ops;
}

}  // namespace neuronsim::backend
