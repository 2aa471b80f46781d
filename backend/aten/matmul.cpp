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

bool is_fp8(const at::Tensor& t) {
  return t.defined() &&
         (t.scalar_type() == at::kFloat8_e4m3fn || t.scalar_type() == at::kFloat8_e5m2);
}

// torch._scaled_mm as the library's FP8 matmul (double-row on trn2): FP8 matrices, tensor-wise
// fp32 scales (one value each, read by the program), an optional bias, a 16- or 32-bit float
// output. Other forms (row-wise scales, scale_result, other dtypes) take the CPU path.
bool scaled_mm_supported(const OpInvocation& inv) {
  const at::Tensor a = inv.tensor(0), b = inv.tensor(1), sa = inv.tensor(2), sb = inv.tensor(3);
  // PyTorch's rule for every backend (its Meta kernel's), checked here: the CPU kernel the
  // fallback would run answers by host (oneDNN on AMX-FP16 CPUs takes a float64 scale).
  TORCH_CHECK(!sa.defined() || !sb.defined() || sa.numel() != 1 || sb.numel() != 1 ||
                  (sa.scalar_type() == at::kFloat && sb.scalar_type() == at::kFloat),
              "For tensorwise scaling, both scale_a and scale_b must be float (fp32) tensors.");
  if (!is_fp8(a) || !is_fp8(b) || a.dim() != 2 || b.dim() != 2) return false;
  for (const at::Tensor& s : {sa, sb}) {
    if (!s.defined() || s.scalar_type() != at::kFloat || s.numel() != 1) return false;
  }
  if (inv.has_arg("scale_result") && !inv.arg("scale_result").isNone()) return false;
  // The output's dtype (outputs are not allocated yet): out_dtype, the out= tensor's, or the
  // operands' (an FP8 output, which this kernel does not write).
  at::ScalarType out = a.scalar_type();
  if (inv.has_arg("out") && inv.arg("out").isTensor()) {
    out = inv.arg("out").toTensor().scalar_type();
  } else if (inv.has_arg("out_dtype") && !inv.arg("out_dtype").isNone()) {
    out = static_cast<at::ScalarType>(inv.arg("out_dtype").toInt());
  }
  if (out != at::kFloat && out != at::kBFloat16 && out != at::kHalf) return false;
  if (inv.has_arg("bias") && inv.arg("bias").isTensor()) {
    const at::Tensor bias = inv.arg("bias").toTensor();
    if (bias.defined() && (!c10::isFloatingType(bias.scalar_type()) || bias.dim() != 1))
      return false;
  }
  return true;
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
  ops.push_back({"aten::_scaled_mm",
                 [](const OpInvocation& inv) {
                   kernels::MatmulSpec spec;
                   spec.scales = {inv.describe(inv.tensor(2)), inv.describe(inv.tensor(3))};
                   std::optional<kernels::TensorDesc> bd;
                   if (inv.has_arg("bias") && inv.arg("bias").isTensor() &&
                       inv.arg("bias").toTensor().defined()) {
                     bd = inv.describe(inv.arg("bias").toTensor());
                   }
                   return Programs{kernels::build_matmul_grid(
                       inv.name, inv.describe(inv.tensor(0)), inv.describe(inv.tensor(1)),
                       inv.describe(inv.outputs.at(0)), bd, spec, inv.core(), inv.grid)};
                 },
                 scaled_mm_supported});
  return ops;
}

}  // namespace neuronsim::backend
