#include "aten/op_check.h"

#include <ATen/ATen.h>

#include <string>

#include "aten/device_mismatch.h"
#include "aten/device_tensor.h"

namespace neuronsim::backend {

namespace {

// zero_/fill_(0): zero-filling needs no complex arithmetic, so a complex64 tensor is zeroed
// natively as its real (float32) view.
bool zero_fill(const std::string& name, const c10::IValue& value) {
  if (name == "aten::zero_" || name == "aten::zero") return true;
  if (name != "aten::fill_" && name != "aten::fill") return false;  // zero_ decomposes to fill_(0)
  if (!value.isScalar()) return false;
  const c10::Scalar s = value.toScalar();
  return s.isComplex() ? s.toComplexDouble() == c10::complex<double>(0, 0) : s.toDouble() == 0.0;
}

}  // namespace

std::optional<c10::Device> native_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t base = stack->size() - nargs;
  const std::string& name = schema.name();
  const bool zeroing = zero_fill(name, nargs > 1 ? (*stack)[base + 1] : c10::IValue());
  std::optional<c10::Device> device;
  bool unsupported = false;
  for (size_t i = base; i < stack->size(); ++i) {
    for_each_tensor((*stack)[i], [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (is_neuron(t) && !device) device = t.device();
      if (!device_dtype(t.scalar_type()) && !(zeroing && t.scalar_type() == at::kComplexFloat))
        unsupported = true;
    });
  }
  if (unsupported || !device) return std::nullopt;
  // As on CUDA: CPU tensors mix with device tensors only as 0-dim scalars or as advanced-indexing
  // indices; tensors on another NeuronCore never do. A CPU tensor is named as TorchNeuron names it
  // (its argument's position), then as CUDA does.
  for (size_t i = 0; i < nargs; ++i) {
    const bool indices = schema.arguments()[i].name() == "indices";
    c10::IValue& v = (*stack)[base + i];
    int64_t element = -1;
    const bool list = v.isList();
    for_each_tensor(v, [&](const at::Tensor& t) {
      ++element;
      if (!t.defined()) return;
      const bool ok = is_neuron(t) ? t.device() == *device : (t.dim() == 0 || indices);
      TORCH_CHECK(
          ok, is_neuron(t) ? "" : torchneuron_device_mismatch(schema, i, list ? element : -1, t),
          "Expected all tensors to be on the same device, but found at least two devices, ",
          *device, " and ", t.device(), "! (in ", name, ")");
    });
    if (schema.arguments()[i].name() == "values" && v.isTensor() && v.toTensor().defined() &&
        !is_neuron(v.toTensor())) {
      v = v.toTensor().to(*device);
    }
  }
  return device;
}

}  // namespace neuronsim::backend
