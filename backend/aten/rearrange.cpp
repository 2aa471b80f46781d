// Reversed and rotated copies (flip, roll: DMA only, kernels/rearrange.h) and index-generated
// tensors (eye, linspace, logspace: kernels/generators.h). Values come from ATen's CPU kernels
// on the CPU views; the programs give the time (and the values in ISA mode).
#include <ATen/ATen.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/generators.h"
#include "neuronsim/kernels/rearrange.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// A contiguous tensor as one dim (roll without dims rotates the flattened tensor).
kernels::TensorDesc flat(kernels::TensorDesc d) {
  d.sizes = {static_cast<int64_t>(d.numel())};
  d.strides = {1};
  return d;
}

// A linspace/logspace end point: a Scalar, or a CPU scalar tensor (its value is part of the
// program key); device tensors would make the program depend on device data.
std::optional<double> end_point(const OpInvocation& inv, const std::string& name) {
  const c10::IValue& v = inv.arg(name);
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (is_neuron(t) || t.numel() != 1 || t.is_complex()) return std::nullopt;
    return t.item().toDouble();
  }
  if (v.isScalar() && v.toScalar().isComplex()) return std::nullopt;
  return inv.scalar(name, 0.0);
}

// Floating outputs only: integer linspace truncates values computed in double on the CPU.
bool linspace_supported(const OpInvocation& inv, bool log) {
  const at::Tensor out = inv.outputs.empty() ? inv.tensor(inv.args.size() - 1) : inv.outputs[0];
  if (!out.defined() || !at::isFloatingType(out.scalar_type()) || out.dim() > 1) return false;
  if (!end_point(inv, "start") || !end_point(inv, "end")) return false;
  return !log || inv.scalar("base", 10.0) > 0.0;
}

Programs linspace(const OpInvocation& inv, bool log) {
  const float base = log ? static_cast<float>(inv.scalar("base", 10.0)) : 0.0f;
  return {kernels::build_linspace(inv.name, inv.describe(inv.outputs.at(0)),
                                  static_cast<float>(*end_point(inv, "start")),
                                  static_cast<float>(*end_point(inv, "end")), base, inv.core())};
}

}  // namespace

NativeOpTable rearrange_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::flip", [](const OpInvocation& inv) {
                   return Programs{kernels::build_flip(inv.name, inv.describe(inv.tensor(0)),
                                                       inv.describe(inv.outputs.at(0)),
                                                       inv.ints("dims"), inv.core())};
                 }});
  ops.push_back({"aten::roll",
                 [](const OpInvocation& inv) {
                   kernels::TensorDesc in = inv.describe(inv.tensor(0)),
                                       out = inv.describe(inv.outputs.at(0));
                   std::vector<int64_t> dims = inv.ints("dims");
                   if (dims.empty()) {
                     in = flat(in);
                     out = flat(out);
                     dims = {0};
                   }
                   return Programs{kernels::build_roll(inv.name, in, out, inv.ints("shifts"), dims,
                                                       inv.core())};
                 },
                 [](const OpInvocation& inv) {
                   // Without dims the flattened tensor rolls: both sides must be one run.
                   const at::Tensor in = inv.tensor(0);
                   if (!in.defined() || !inv.ints("dims").empty()) return true;
                   return in.is_contiguous() && inv.ints("shifts").size() == 1;
                 }});
  ops.push_back({"aten::eye", [](const OpInvocation& inv) {
                   return Programs{
                       kernels::build_eye(inv.name, inv.describe(inv.outputs.at(0)), inv.core())};
                 }});
  ops.push_back({"aten::linspace", [](const OpInvocation& inv) { return linspace(inv, false); },
                 [](const OpInvocation& inv) { return linspace_supported(inv, false); }});
  ops.push_back({"aten::logspace", [](const OpInvocation& inv) { return linspace(inv, true); },
                 [](const OpInvocation& inv) { return linspace_supported(inv, true); }});
  for (NativeOp& op : ops) op.cacheable = true;  // programs follow from shapes and scalars
  return ops;
}

}  // namespace neuronsim::backend
