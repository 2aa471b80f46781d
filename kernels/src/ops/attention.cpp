// Attention: eager F.scaled_dot_product_attention's fused op (the "overrideable" backend the
// device picks when flash_attention_supported) and the compiler's neuronsim::sdpa node, both the
// library's flash attention kernel.
#include "neuronsim/kernels/ops/attention.h"

#include <cmath>
#include <optional>

#include "neuronsim/kernels/attention.h"
#include "neuronsim/kernels/graph/lowerer.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using graph::Lowerer;

constexpr int64_t kMaxHeadDim = 128;  // the kernel's: the head dim is TensorE's contraction

bool float_kernel_dtype(ScalarType t) {
  return t == ScalarType::kFloat32 || t == ScalarType::kBFloat16 || t == ScalarType::kFloat16;
}

double scale_of(const OpCall& call, int64_t head_dim) {
  return call.number("scale", 1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// neuronsim::sdpa (python/neuronsim/torch_compile/attention.py: what scaled_dot_product_attention
// and the hand-written softmax(q @ k^T * scale) @ v become): one flash attention program.
void lower_attention(Lowerer& l) {
  const int q = l.tensor("q"), k = l.tensor("k"), v = l.tensor("v");
  const int out = l.node().outputs.at(0);
  std::vector<int> inputs{q, k, v};
  if (l.has("attn_mask")) {
    const int m = l.tensor("attn_mask");
    if (l.meta(m).is_bool() || !l.meta(m).fusable())
      throw graph::NotLowered("mask is not a float mask");
    inputs.push_back(m);
  }
  const graph::TensorMeta& qm = l.meta(q);
  for (int x : {q, k, v, out}) {
    const graph::TensorMeta& m = l.meta(x);
    if (!m.on_device || m.dim() < 2 || m.dtype != qm.dtype || m.is_bool() ||
        (m.dtype != device_model::DType::kFp32 && m.dtype != device_model::DType::kBf16 &&
         m.dtype != device_model::DType::kFp16)) {
      throw graph::NotLowered(
          "attention operands of one float dtype on the device are needed; got " + m.to_string());
    }
  }
  const int64_t d = qm.sizes.back();
  if (d > 128 || l.meta(v).sizes.back() > 128) throw graph::NotLowered("head dims above 128");
  const double scale = l.number("scale", 1.0 / std::sqrt(static_cast<double>(d)));
  if (!(scale > 0) || !std::isfinite(scale)) throw graph::NotLowered("scale is not positive");
  const graph::Arg& causal = l.node().arg("is_causal");
  l.attention(inputs, out, static_cast<float>(scale),
              causal.kind == graph::Arg::Kind::kBool && causal.b);
}

}  // namespace

bool flash_attention_supported(const TensorArg& q, const TensorArg& k, const TensorArg& v,
                               const TensorArg& mask, double dropout_p) {
  if (dropout_p != 0.0 || q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim()) return false;
  if (!float_kernel_dtype(q.type) || k.type != q.type || v.type != q.type) return false;
  const int64_t n = q.dim();
  for (int64_t d = 0; d < n - 2; ++d) {
    if (k.size(d) != q.size(d) || v.size(d) != q.size(d)) return false;  // no GQA broadcast
  }
  if (k.size(n - 1) != q.size(n - 1) || v.size(n - 2) != k.size(n - 2) || k.size(n - 2) < 1)
    return false;
  if (q.size(n - 1) > kMaxHeadDim || v.size(n - 1) > kMaxHeadDim) return false;
  if (mask.defined) {
    if (mask.type != q.type || mask.dim() > n) return false;
    const int64_t scores[] = {k.size(n - 2), q.size(n - 2)};  // last dim, then the one before
    for (int64_t i = 1; i <= mask.dim(); ++i) {
      const int64_t want = i <= 2 ? scores[i - 1] : q.size(n - i);
      const int64_t got = mask.size(mask.dim() - i);
      if (got != 1 && got != want) return false;
    }
  }
  return true;
}

std::vector<OpRule> attention_rules() {
  OpRule fused;
  fused.name = "aten::_scaled_dot_product_fused_attention_overrideable";
  fused.build = [](const OpCall& call) {
    const TensorArg q = call.tensor(0), k = call.tensor(1), v = call.tensor(2);
    std::optional<TensorDesc> m;
    if (call.has("attn_bias")) m = call.tensor("attn_bias").desc;
    AttentionSpec spec;
    spec.scale = static_cast<float>(scale_of(call, q.size(-1)));
    spec.causal = call.boolean("is_causal", false);
    return Programs{build_flash_attention(call.name(), q.desc, k.desc, v.desc, call.output(0).desc,
                                          m, spec, call.core())};
  };
  fused.supports = [](const OpCall& call) {
    return flash_attention_supported(call.tensor(0), call.tensor(1), call.tensor(2),
                                     call.tensor("attn_bias"), call.number("dropout_p", 0.0)) &&
           !call.boolean("return_debug_mask", false);
  };
  // The program writes the output, not the logsumexp (nothing reads it without a backward).
  fused.host_values_reason = "the flash attention program does not write the logsumexp";
  fused.backend_values = true;  // PrivateUse1's own op: no CPU kernel

  OpRule graph_sdpa;
  graph_sdpa.name = "neuronsim::sdpa";
  graph_sdpa.lower = lower_attention;
  return {fused, graph_sdpa};
}

}  // namespace neuronsim::kernels::ops
