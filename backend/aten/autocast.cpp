// torch.autocast("neuron"): the same op lists and policies PyTorch uses for CUDA
// (matmul-like ops in the lower precision, reductions and norms in fp32).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace neuronsim::backend {
namespace {

using at::autocast::CastPolicy;

// Every other op runs under autocast unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_LOWER
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE
}

}  // namespace
}  // namespace neuronsim::backend
