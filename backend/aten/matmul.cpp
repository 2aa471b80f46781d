// mm, bmm, mv, dot and their add* forms: the kernel library's matmul on TensorE.
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/spmd.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

bool all_float(const OpInvocation& inv) {
  for (const auto& v : inv.args) {
    if (v.isTensor() && v.toTensor().defined() && !c10::isFloatingType(v.toTensor().scalar_type()))
      return false;
  }
  return true;
}

kernels::TensorDesc as_matrix(const OpInvocation& inv, const at::Tensor& t, bool column) {
  // A vector operand of mv/dot as an [n, 1] (column) or [1, n] (row) matrix.
  kernels::TensorDesc d = inv.describe(t);
  if (t.dim() == 1) {
    const int64_t s = d.strides[0];
    if (column) {
      d.sizes = {t.size(0), 1};
      d.strides = {s, 1};
    } else {
      d.sizes = {1, t.size(0)};
      d.strides = {s * t.size(0), s};
    }
  }
  return d;
}

}  // namespace

NativeOpTable matmul_ops() {
  NativeOpTable ops;
  auto build = [](const OpInvocation& inv, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor* bias, float alpha, float beta) {
    kernels::MatmulSpec spec;
    spec.alpha = alpha;
    spec.beta = beta;
    const at::Tensor& out = inv.outputs.at(0);
    kernels::TensorDesc c = inv.describe(out);
    if (out.dim() == 1) c = as_matrix(inv, out, b.dim() == 1 ? true : false);
    if (out.dim() == 0) c = kernels::TensorDesc{c.address, c.dtype, {1, 1}, {1, 1}};
    std::optional<kernels::TensorDesc> bd;
    if (bias && bias->defined() && beta != 0.0f) bd = inv.describe(*bias);
    return Programs{kernels::build_matmul_grid(inv.name, as_matrix(inv, a, false),
                                               as_matrix(inv, b, true), c, bd, spec, inv.core(),
                                               inv.grid)};
  };
  // TensorE multiplies floating-point data only; integer matmuls take the CPU fallback.
  for (const char* n : {"aten::mm", "aten::bmm", "aten::mv", "aten::dot"}) {
    ops.push_back({n,
                   [build](const OpInvocation& inv) {
                     return build(inv, inv.tensor(0), inv.tensor(1), nullptr, 1, 0);
                   },
                   all_float});
  }
  for (const char* n : {"aten::addmm", "aten::baddbmm", "aten::addmv"}) {
    ops.push_back({n,
                   [build](const OpInvocation& inv) {
                     const at::Tensor bias = inv.tensor(0);
                     return build(inv, inv.tensor(1), inv.tensor(2), &bias,
                                  static_cast<float>(inv.scalar("alpha", 1)),
                                  static_cast<float>(inv.scalar("beta", 1)));
                   },
                   all_float});
  }
  return ops;
}

}  // namespace neuronsim::backend
