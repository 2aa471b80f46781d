#include "aten/torch_op_call.h"

#include <ATen/ATen.h>

#include "accelerator/context.h"

namespace neuronsim::backend {

using kernels::ops::ArgKind;
using kernels::ops::ScalarType;
using kernels::ops::TensorArg;

ScalarType scalar_type_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return ScalarType::kBool;
    case c10::ScalarType::Byte:
      return ScalarType::kUInt8;
    case c10::ScalarType::Char:
      return ScalarType::kInt8;
    case c10::ScalarType::Short:
      return ScalarType::kInt16;
    case c10::ScalarType::Int:
      return ScalarType::kInt32;
    case c10::ScalarType::Long:
      return ScalarType::kInt64;
    case c10::ScalarType::Half:
      return ScalarType::kFloat16;
    case c10::ScalarType::BFloat16:
      return ScalarType::kBFloat16;
    case c10::ScalarType::Float:
      return ScalarType::kFloat32;
    case c10::ScalarType::Double:
      return ScalarType::kFloat64;
    case c10::ScalarType::Float8_e4m3fn:
      return ScalarType::kFloat8E4M3;
    case c10::ScalarType::Float8_e5m2:
      return ScalarType::kFloat8E5M2;
    case c10::ScalarType::ComplexFloat:
      return ScalarType::kComplex64;
    case c10::ScalarType::ComplexDouble:
      return ScalarType::kComplex128;
    default:
      return ScalarType::kOther;
  }
}

namespace {

// The memory of a tensor's first element, when it has any: fake and functional tensors (dynamo
// tracing asks the fused-kernel choice with them) and zero-size tensors have none.
const void* host_data(const at::Tensor& t) {
  if (t.numel() == 0 || !t.has_storage()) return nullptr;
  try {
    return t.data_ptr();
  } catch (const c10::Error&) {
    return nullptr;
  }
}

// A tensor's device view without an address: the device dtype (uint8 for types the device does
// not compute with), sizes, and strides in device elements (64-bit data as 32-bit words).
void describe_shape(kernels::TensorDesc& d, c10::ScalarType type, c10::IntArrayRef sizes,
                    c10::IntArrayRef strides) {
  const auto dt = device_dtype(type);
  d.dtype = dt ? *dt : device_model::DType::kUint8;
  const int64_t widen = is_64bit(type) ? 2 : 1;
  d.sizes.assign(sizes.begin(), sizes.end());
  for (int64_t s : strides) d.strides.push_back(s * widen);
}

}  // namespace

TensorArg tensor_arg(const at::Tensor& t, const HbmAddressOf& hbm_address) {
  TensorArg a;
  if (!t.defined()) return a;
  a.defined = true;
  a.on_device = is_neuron(t);
  a.type = scalar_type_of(t.scalar_type());
  if (t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    // A fake tensor of a graph traced with symbolic sizes (dynamo asks the fused-kernel choice
    // with them): its sizes as this trace has them, guarded, so the graph specializes on what
    // the answer read (as size(d) does).
    std::vector<int64_t> sizes, strides;
    for (int64_t d = 0; d < t.dim(); ++d) {
      sizes.push_back(t.sym_size(d).guard_int(__FILE__, __LINE__));
      strides.push_back(t.sym_stride(d).guard_int(__FILE__, __LINE__));
    }
    describe_shape(a.desc, t.scalar_type(), sizes, strides);
    return a;
  }
  a.data = host_data(t);
  // A complex tensor is described as its real view (the conjugate bit is metadata the rule
  // reads from the op, not from the layout).
  const at::Tensor v = t.is_complex() ? at::view_as_real(t.is_conj() ? t._conj() : t) : t;
  if (a.on_device && hbm_address && device_dtype(v.scalar_type())) {
    a.desc = describe(v, hbm_address);
    return a;
  }
  // Shapes only: support checks run before the launch knows addresses, host tensors have none,
  // and types the device does not compute with have no device view.
  describe_shape(a.desc, v.scalar_type(), v.sizes(), v.strides());
  return a;
}

const c10::IValue* TorchOpCall::find(std::string_view arg) const {
  const auto& args = inv_.schema->arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() == arg) return &inv_.args.at(i);
  }
  return nullptr;
}

TensorArg TorchOpCall::arg_of(const at::Tensor& t) const {
  return tensor_arg(t, inv_.core_params ? inv_.hbm_address : HbmAddressOf());
}

ArgKind TorchOpCall::kind(std::string_view arg) const {
  const c10::IValue* v = find(arg);
  if (!v) return ArgKind::kAbsent;
  if (v->isNone()) return ArgKind::kNone;
  if (v->isTensor()) return v->toTensor().defined() ? ArgKind::kTensor : ArgKind::kNone;
  if (v->isTensorList()) return ArgKind::kTensors;
  if (v->isBool()) return ArgKind::kBool;
  if (v->isInt() || v->isSymInt()) return ArgKind::kInt;
  if (v->isDouble()) return ArgKind::kFloat;
  if (v->isString()) return ArgKind::kString;
  if (v->isIntList()) return ArgKind::kInts;
  if (v->isScalar()) {
    const c10::Scalar s = v->toScalar();
    return s.isBoolean() ? ArgKind::kBool : s.isIntegral(false) ? ArgKind::kInt : ArgKind::kFloat;
  }
  if (v->isDoubleList()) return ArgKind::kFloats;
  if (v->isList()) {
    const auto& l = v->toListRef();
    if (!l.empty() && (l[0].isTensor() || l[0].isNone())) return ArgKind::kTensors;
    if (!l.empty() && l[0].isInt()) return ArgKind::kInts;
    return ArgKind::kFloats;
  }
  return ArgKind::kNone;
}

TensorArg TorchOpCall::tensor(std::string_view arg) const {
  const c10::IValue* v = find(arg);
  return v && v->isTensor() ? arg_of(v->toTensor()) : TensorArg{};
}

TensorArg TorchOpCall::tensor(size_t index) const {
  return arg_of(inv_.tensor(index));
}

std::vector<TensorArg> TorchOpCall::tensors(std::string_view arg) const {
  std::vector<TensorArg> out;
  const c10::IValue* v = find(arg);
  if (!v) return out;
  if (v->isTensorList()) {
    for (const at::Tensor& t : v->toTensorList()) out.push_back(arg_of(t));
  } else if (v->isList()) {  // Tensor?[]: None entries keep their positions
    for (const c10::IValue& e : v->toListRef())
      out.push_back(e.isTensor() ? arg_of(e.toTensor()) : TensorArg{});
  }
  return out;
}

double TorchOpCall::number(std::string_view arg, double fallback) const {
  const c10::IValue* v = find(arg);
  if (!v || v->isNone()) return fallback;
  if (v->isScalar()) return v->toScalar().toDouble();
  if (v->isDouble()) return v->toDouble();
  if (v->isInt()) return static_cast<double>(v->toInt());
  if (v->isBool()) return v->toBool() ? 1.0 : 0.0;
  if (v->isTensor() && v->toTensor().defined() && v->toTensor().numel() == 1)
    return v->toTensor().item().toDouble();
  return fallback;
}

int64_t TorchOpCall::integer(std::string_view arg, int64_t fallback) const {
  const c10::IValue* v = find(arg);
  if (!v || v->isNone()) return fallback;
  if (v->isInt()) return v->toInt();
  if (v->isSymInt()) return v->toSymInt().guard_int(__FILE__, __LINE__);
  if (v->isBool()) return v->toBool() ? 1 : 0;
  if (v->isScalar()) return v->toScalar().toLong();
  return static_cast<int64_t>(number(arg, static_cast<double>(fallback)));
}

std::vector<double> TorchOpCall::numbers(std::string_view arg) const {
  std::vector<double> out;
  const c10::IValue* v = find(arg);
  if (!v || v->isNone()) return out;
  if (v->isDoubleList()) return v->toDoubleVector();
  if (v->isIntList()) {
    for (int64_t i : v->toIntVector()) out.push_back(static_cast<double>(i));
    return out;
  }
  for (const c10::IValue& e : v->toListRef()) out.push_back(e.toScalar().toDouble());
  return out;
}

std::vector<int64_t> TorchOpCall::ints(std::string_view arg) const {
  const c10::IValue* v = find(arg);
  if (!v || v->isNone()) return {};
  if (v->isInt()) return {v->toInt()};
  return inv_.ints(std::string(arg));
}

std::string TorchOpCall::str(std::string_view arg) const {
  const c10::IValue* v = find(arg);
  return v && v->isString() ? std::string(v->toStringRef()) : std::string();
}

std::optional<ScalarType> TorchOpCall::scalar_type(std::string_view arg) const {
  const c10::IValue* v = find(arg);
  if (!v || !v->isInt()) return std::nullopt;
  return scalar_type_of(static_cast<c10::ScalarType>(v->toInt()));
}

const device_model::CoreParams& TorchOpCall::core() const {
  if (inv_.core_params) return *inv_.core_params;
  // Support checks run before the launch: the core's parameters are the device's for good.
  return *with_runtime([](runtime::Runtime& r) -> const device_model::CoreParams* {
    return &r.device().params().core;
  });
}

TensorArg TorchOpCall::output(size_t i) const {
  return i < inv_.outputs.size() ? arg_of(inv_.outputs[i]) : TensorArg{};
}

TensorArg TorchOpCall::count() const {
  return arg_of(inv_.count);
}

}  // namespace neuronsim::backend
