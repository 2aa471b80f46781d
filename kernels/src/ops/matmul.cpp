// mm, bmm, mv, dot and their add* forms, and torch._scaled_mm: the kernel library's matmul on
// TensorE eagerly; a matmul op of the IR (with its epilogue) in compiled graphs.
#include <optional>
#include <stdexcept>

#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/spmd.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using device_model::AluOp;
using graph::Lowerer;

// TensorE multiplies floating-point data only; integer matmuls take the CPU fallback.
bool all_float(const OpCall& call) {
  for (size_t i = 0; i < call.num_args(); ++i) {
    const TensorArg t = call.tensor(i);
    if (t.defined && !t.is_floating()) return false;
  }
  return true;
}

// A vector operand of mv/dot as an [n, 1] (column) or [1, n] (row) matrix.
TensorDesc as_matrix(const TensorArg& t, bool column) {
  TensorDesc d = t.desc;
  if (t.dim() == 1) {
    const int64_t s = d.strides[0], n = t.size(0);
    d.sizes = column ? std::vector<int64_t>{n, 1} : std::vector<int64_t>{1, n};
    d.strides = column ? std::vector<int64_t>{s, 1} : std::vector<int64_t>{s * n, s};
  }
  return d;
}

Programs matmul_program(const OpCall& call, const TensorArg& a, const TensorArg& b,
                        const TensorArg* bias, float alpha, float beta) {
  MatmulSpec spec;
  spec.alpha = alpha;
  spec.beta = beta;
  const TensorArg out = call.output(0);
  TensorDesc c = out.desc;
  if (out.dim() == 1) c = as_matrix(out, b.dim() == 1);
  if (out.dim() == 0) c = TensorDesc{c.address, c.dtype, {1, 1}, {1, 1}};
  std::optional<TensorDesc> bd;
  if (bias && bias->defined && beta != 0.0f) bd = bias->desc;
  return {build_matmul_grid(call.name(), as_matrix(a, false), as_matrix(b, true), c, bd, spec,
                            call.core(), call.grid())};
}

// torch._scaled_mm as the library's FP8 matmul (double-row on trn2): FP8 matrices, tensor-wise
// fp32 scales (one value each, read by the program), an optional bias, a 16- or 32-bit float
// output. Other forms (row-wise scales, scale_result, other dtypes) take the CPU path.
bool scaled_mm_supported(const OpCall& call) {
  const TensorArg a = call.tensor(0), b = call.tensor(1), sa = call.tensor(2), sb = call.tensor(3);
  // PyTorch's rule for every backend (its Meta kernel's), checked here: the CPU kernel the
  // fallback would run answers by host (oneDNN on AMX-FP16 CPUs takes a float64 scale).
  if (sa.defined && sb.defined && sa.numel() == 1 && sb.numel() == 1 &&
      (sa.type != ScalarType::kFloat32 || sb.type != ScalarType::kFloat32))
    throw std::invalid_argument(
        "For tensorwise scaling, both scale_a and scale_b must be float (fp32) tensors.");
  if (!a.defined || !b.defined || !is_fp8(a.type) || !is_fp8(b.type) || a.dim() != 2 ||
      b.dim() != 2)
    return false;
  for (const TensorArg& s : {sa, sb}) {
    if (!s.defined || s.type != ScalarType::kFloat32 || s.numel() != 1) return false;
  }
  if (call.has("scale_result")) return false;
  // The output's dtype (outputs are not allocated yet): out_dtype, the out= tensor's, or the
  // operands' (an FP8 output, which this kernel does not write).
  ScalarType out = a.type;
  if (call.kind("out") == ArgKind::kTensor) {
    out = call.tensor("out").type;
  } else if (const auto t = call.scalar_type("out_dtype")) {
    out = *t;
  }
  if (out != ScalarType::kFloat32 && out != ScalarType::kBFloat16 && out != ScalarType::kFloat16)
    return false;
  if (call.kind("bias") == ArgKind::kTensor) {
    const TensorArg bias = call.tensor("bias");
    if (!bias.is_floating() || bias.dim() != 1) return false;
  }
  return true;
}

void lower_addmm(Lowerer& l, const char* a, const char* b) {
  const int out = l.node().outputs.at(0);
  const int prod = l.temp(l.meta(out), "mm");
  l.matmul(l.tensor(a), l.tensor(b), prod);
  const float alpha = static_cast<float>(l.number("alpha", 1.0));
  const float beta = static_cast<float>(l.number("beta", 1.0));
  l.begin();
  Arg p = l.value(prod);
  if (alpha != 1.0f) p = l.e().alu(AluOp::kMultiply, p, Arg::constant(alpha));
  if (beta != 0.0f) {
    Arg c = l.operand("self");
    if (beta != 1.0f) c = l.e().alu(AluOp::kMultiply, c, Arg::constant(beta));
    l.e().alu(AluOp::kAdd, p, c);
  } else if (alpha == 1.0f) {
    l.e().alu(AluOp::kBypass, p, Arg::constant(0));
  }
  l.pointwise(out);
}

}  // namespace

std::vector<OpRule> matmul_rules() {
  std::vector<OpRule> ops;
  auto plain = [](const OpCall& call) {
    return matmul_program(call, call.tensor(0), call.tensor(1), nullptr, 1, 0);
  };
  auto lower_mm = [](Lowerer& l) {
    l.matmul(l.tensor("self"), l.tensor("mat2"), l.node().outputs.at(0));
  };
  ops.push_back(make_rule("aten::mm", plain, all_float, lower_mm));
  ops.push_back(make_rule("aten::bmm", plain, all_float, lower_mm));
  ops.push_back(make_rule("aten::mv", plain, all_float, nullptr));
  ops.push_back(make_rule("aten::dot", plain, all_float, nullptr));
  auto with_bias = [](const OpCall& call) {
    const TensorArg bias = call.tensor(0);
    return matmul_program(call, call.tensor(1), call.tensor(2), &bias,
                          static_cast<float>(call.number("alpha", 1)),
                          static_cast<float>(call.number("beta", 1)));
  };
  ops.push_back(make_rule("aten::addmm", with_bias, all_float,
                          [](Lowerer& l) { lower_addmm(l, "mat1", "mat2"); }));
  ops.push_back(make_rule("aten::baddbmm", with_bias, all_float,
                          [](Lowerer& l) { lower_addmm(l, "batch1", "batch2"); }));
  ops.push_back(make_rule("aten::addmv", with_bias, all_float, nullptr));
  ops.push_back(make_rule(
      "aten::_scaled_mm",
      [](const OpCall& call) {
        MatmulSpec spec;
        spec.scales = {call.tensor(2).desc, call.tensor(3).desc};
        std::optional<TensorDesc> bd;
        if (call.kind("bias") == ArgKind::kTensor) bd = call.tensor("bias").desc;
        return Programs{build_matmul_grid(call.name(), call.tensor(0).desc, call.tensor(1).desc,
                                          call.output(0).desc, bd, spec, call.core(), call.grid())};
      },
      scaled_mm_supported, nullptr));
  return ops;
}

}  // namespace neuronsim::kernels::ops
