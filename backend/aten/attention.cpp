// Eager F.scaled_dot_product_attention on the device: PyTorch asks a PrivateUse1 backend which
// fused kernel to use (_fused_sdp_choice_stub); for inputs the kernel library's flash attention
// takes (kernels/ops/attention.h) and no gradient to record, the answer is the "overrideable"
// backend, whose op _scaled_dot_product_fused_attention_overrideable is native (its rule is in
// kernels/src/ops/attention.cpp): its values (output and logsumexp) come from the host in fp32.
// Everything else (dropout, GQA, bool masks, inputs requiring grad: the overrideable backward is
// not written) keeps the math path's decomposition into device ops.
// NEURONSIM_FLASH_ATTENTION=0 keeps the math path for all.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/core/stack.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "aten/native_ops.h"
#include "aten/torch_op_call.h"
#include "neuronsim/kernels/ops/attention.h"

namespace neuronsim::backend {
namespace {

using torch::jit::Stack;

bool enabled() {
  const char* e = std::getenv("NEURONSIM_FLASH_ATTENTION");
  return !(e && std::strcmp(e, "0") == 0);
}

int64_t neuron_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& mask, double dropout_p,
                          bool /*is_causal*/, std::optional<double> scale, bool enable_gqa) {
  using at::SDPBackend;
  const bool grad =
      at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                     (mask && mask->defined() && mask->requires_grad()));
  const bool positive = !scale || (*scale > 0 && std::isfinite(*scale));
  const auto arg = [](const at::Tensor& t) { return tensor_arg(t, HbmAddressOf()); };
  const at::Tensor m = mask ? *mask : at::Tensor();
  if (!enabled() || grad || enable_gqa || !positive ||
      !kernels::ops::flash_attention_supported(arg(q), arg(k), arg(v), arg(m), dropout_p))
    return static_cast<int64_t>(SDPBackend::math);
  return static_cast<int64_t>(SDPBackend::overrideable);
}

at::Tensor optional_tensor(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor() : at::Tensor();
}

double scale_of(const c10::IValue& s, int64_t head_dim) {
  return s.isNone() ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : s.toDouble();
}

// Output and logsumexp in fp32 on the host (CPU views), as the program computes them.
void sdpa_values(const c10::OperatorHandle&, Stack* stack) {
  auto a = torch::jit::pop(*stack, 8);
  const at::Tensor q = a[0].toTensor(), k = a[1].toTensor(), v = a[2].toTensor();
  const at::Tensor mask = optional_tensor(a[3]);
  const bool causal = a[5].toBool();
  const double scale = scale_of(a[7], q.size(-1));
  at::Tensor s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)).mul(scale);
  if (mask.defined()) s = s + mask.to(at::kFloat);
  if (causal) {
    const at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, s.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  const at::Tensor lse = at::logsumexp(s, -1);
  const at::Tensor values = at::matmul(at::softmax(s, -1), v.to(at::kFloat)).to(q.scalar_type());
  // The output takes the query's layout, as the op's Meta kernel allocates it
  // (alloc_with_matching_layout): graphs traced with it view the output by those strides.
  std::vector<int64_t> order(static_cast<size_t>(q.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return q.stride(x) > q.stride(y); });
  std::vector<int64_t> permuted_sizes, inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    permuted_sizes.push_back(values.size(order[i]));
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  const at::Tensor out = at::empty(permuted_sizes, values.options()).permute(inverse);
  out.copy_(values);
  const at::Tensor none = at::empty({0}, q.options());
  torch::jit::push(*stack, out, lse, none, none, c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)),
                   none, none, none);
}

}  // namespace

HostValueTable attention_host_values() {
  return {{"aten::_scaled_dot_product_fused_attention_overrideable", sdpa_values}};
}

}  // namespace neuronsim::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuronsim::backend::neuron_sdp_choice)
}  // namespace at::native
