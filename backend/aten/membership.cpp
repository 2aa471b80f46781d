// isin (kernels/membership.h): Tensor_Tensor and Scalar_Tensor run the broadcast compare kernel;
// Tensor_Scalar is one elementwise compare. unique (_unique2): the output size is data-dependent,
// so the device counts the distinct values (first occurrences) and the host reads the count back
// (shape_sync, as for nonzero); the positions of the first occurrences are then resolved on the
// host, as the runtime's descriptor generation does, and a gather copies the values. Values come
// from ATen's CPU kernels on the CPU views; the programs give the time (and, in ISA mode, isin's
// values; unique returns int64 inverse and counts tensors, so it keeps host values).
#include <ATen/ATen.h>

#include "accelerator/context.h"
#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/membership.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

bool is_integer(const c10::IValue& v) {
  if (v.isTensor()) return c10::isIntegralType(v.toTensor().scalar_type(), true);
  return v.isScalar() && v.toScalar().isIntegral(true);
}

float value_of(const c10::IValue& v) {
  return static_cast<float>(v.toScalar().toDouble());
}

Programs isin(const OpInvocation& inv) {
  const c10::IValue &el = inv.args.at(0), &te = inv.args.at(1);
  const bool invert = inv.has_arg("invert") && inv.arg("invert").toBool();
  const bool integer = is_integer(el) && is_integer(te);
  const kernels::TensorDesc out = inv.describe(inv.outputs.at(0));
  if (!te.isTensor()) {  // Tensor_Scalar: one compare per element
    kernels::Expr e;
    e.integer = integer;
    e.alu(invert ? device::AluOp::kNotEqual : device::AluOp::kIsEqual, kernels::Arg::input(0),
          kernels::Arg::constant(value_of(te)));
    return {
        kernels::build_elementwise(inv.name, {inv.describe(el.toTensor())}, out, e, inv.core())};
  }
  std::optional<kernels::TensorDesc> elements;
  if (el.isTensor()) elements = inv.describe(el.toTensor());
  return {kernels::build_isin(inv.name, elements, el.isTensor() ? 0.0f : value_of(el),
                              inv.describe(te.toTensor()), out, invert, integer, inv.core())};
}

bool isin_supported(const OpInvocation& inv) {
  for (const c10::IValue& v : {inv.args.at(0), inv.args.at(1)}) {
    if (v.isTensor() && (!is_neuron(v.toTensor()) || v.toTensor().is_complex())) return false;
    if (v.isScalar() && v.toScalar().isComplex()) return false;
  }
  const c10::IValue& te = inv.args.at(1);
  if (!te.isTensor()) return true;
  // Support checks run before the runtime lock fills in the core's parameters.
  const int64_t max_tests = with_runtime(
      [](runtime::Runtime& r) { return kernels::max_isin_tests(r.device().params().core); });
  if (te.toTensor().numel() > max_tests) return false;
  return te.toTensor().dim() <= 4;
}

Programs unique(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0), out = inv.outputs.at(0);
  Programs p{kernels::build_unique_count(inv.name + "_count", inv.describe(in),
                                         inv.describe(inv.count), inv.core())};
  if (out.numel() == 0) return p;
  // The first occurrence of each distinct value (in sorted order) gathers it into the output.
  const at::Tensor flat = on_cpu(in).reshape({-1});
  const auto [values, inverse, counts] = at::_unique2(flat, true, true, false);
  const int64_t n = flat.numel();
  const at::Tensor first =
      at::full({values.numel()}, n, at::kLong)
          .scatter_reduce(0, inverse.reshape({-1}), at::arange(n, at::kLong), "amin");
  std::vector<int64_t> src = to_vec(first);
  src.resize(std::min<size_t>(src.size(), static_cast<size_t>(out.numel())));
  std::vector<int64_t> dst(src.size());
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<int64_t>(i);
  p.push_back(kernels::build_indexed_copy(inv.name, inv.describe(in.reshape({-1})), src,
                                          inv.describe(out), dst, false, inv.core()));
  return p;
}

// Only the values: the inverse and counts outputs would need a device scatter by sorted rank,
// which the kernel does not do (those calls keep the CPU fallback).
bool unique_supported(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0);
  if (!in.defined() || in.is_complex() || !in.is_contiguous()) return false;
  for (const char* flag : {"return_inverse", "return_counts"}) {
    if (inv.has_arg(flag) && inv.arg(flag).toBool()) return false;
  }
  const int64_t max_n = with_runtime(
      [](runtime::Runtime& r) { return kernels::max_isin_tests(r.device().params().core); });
  return in.numel() <= max_n;
}

}  // namespace

NativeOpTable membership_ops() {
  NativeOpTable ops;
  NativeOp op{"aten::isin", isin, isin_supported};
  op.cacheable = true;  // programs follow from shapes, dtypes and the scalars
  ops.push_back(op);
  NativeOp uq{"aten::_unique2", unique, unique_supported};
  uq.shape_sync = true;
  ops.push_back(uq);
  return ops;
}

}  // namespace neuronsim::backend
