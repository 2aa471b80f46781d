// isin (kernels/membership.h): Tensor_Tensor and Scalar_Tensor run the broadcast compare kernel;
// Tensor_Scalar is one elementwise compare. unique (_unique2): the output size is data-dependent,
// so the device counts the distinct values (first occurrences) and the host reads the count back
// (shape_sync, as for nonzero); the positions of the first occurrences are then resolved on the
// host, as the runtime's descriptor generation does, and a gather copies the values. unique
// returns int64 inverse and counts tensors, so it keeps host values in ISA mode.
#include <algorithm>
#include <map>

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/membership.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

bool is_integer(const OpCall& call, const char* name) {
  const ArgKind k = call.kind(name);
  if (k == ArgKind::kTensor) return call.tensor(name).is_integral(true);
  return k == ArgKind::kInt || k == ArgKind::kBool;
}

// The overloads name their operands in the singular for a Scalar.
const char* elements(const OpCall& call) {
  return call.in_schema("elements") ? "elements" : "element";
}
const char* test_elements(const OpCall& call) {
  return call.in_schema("test_elements") ? "test_elements" : "test_element";
}

Programs isin(const OpCall& call) {
  const char* el = elements(call);
  const char* te = test_elements(call);
  const bool invert = call.boolean("invert", false);
  const bool integer = is_integer(call, el) && is_integer(call, te);
  const TensorDesc out = call.output(0).desc;
  if (call.kind(te) != ArgKind::kTensor) {  // Tensor_Scalar: one compare per element
    Expr e;
    e.integer = integer;
    e.alu(invert ? device_model::AluOp::kNotEqual : device_model::AluOp::kIsEqual, Arg::input(0),
          Arg::constant(static_cast<float>(call.number(te, 0))));
    return {build_elementwise(call.name(), {call.tensor(el).desc}, out, e, call.core())};
  }
  std::optional<TensorDesc> elements;
  const bool el_tensor = call.kind(el) == ArgKind::kTensor;
  if (el_tensor) elements = call.tensor(el).desc;
  return {build_isin(call.name(), elements,
                     el_tensor ? 0.0f : static_cast<float>(call.number(el, 0)),
                     call.tensor(te).desc, out, invert, integer, call.core())};
}

bool isin_supported(const OpCall& call) {
  for (const char* name : {elements(call), test_elements(call)}) {
    if (call.kind(name) != ArgKind::kTensor) continue;
    const TensorArg t = call.tensor(name);
    if (!t.on_device || is_complex(t.type)) return false;
  }
  if (call.kind(test_elements(call)) != ArgKind::kTensor) return true;
  const TensorArg te = call.tensor(test_elements(call));
  if (static_cast<int64_t>(te.numel()) > max_isin_tests(call.core())) return false;
  return te.dim() <= 4;
}

Programs unique(const OpCall& call) {
  const TensorArg in = call.tensor(0), out = call.output(0);
  Programs p{build_unique_count(call.name() + "_count", in.desc, call.count().desc, call.core())};
  if (out.numel() == 0) return p;
  // The first occurrence of each distinct value (in sorted order) gathers it into the output.
  const std::vector<double> v = read_doubles(in);
  std::map<double, int64_t> first;
  for (size_t i = 0; i < v.size(); ++i) first.emplace(v[i], static_cast<int64_t>(i));
  std::vector<int64_t> src;
  for (const auto& [value, at] : first) {
    if (src.size() >= out.numel()) break;
    src.push_back(at);
  }
  std::vector<int64_t> dst(src.size());
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<int64_t>(i);
  TensorDesc flat = in.desc;
  flat.sizes = {static_cast<int64_t>(in.numel())};
  flat.strides = {1};
  p.push_back(build_indexed_copy(call.name(), flat, src, out.desc, dst, false, call.core()));
  return p;
}

// Only the values: the inverse and counts outputs would need a device scatter by sorted rank,
// which the kernel does not do (those calls keep the CPU fallback).
bool unique_supported(const OpCall& call) {
  const TensorArg in = call.tensor(0);
  if (!in.defined || is_complex(in.type) || !in.is_contiguous()) return false;
  for (const char* flag : {"return_inverse", "return_counts"}) {
    if (call.boolean(flag, false)) return false;
  }
  return static_cast<int64_t>(in.numel()) <= max_isin_tests(call.core());
}

}  // namespace

std::vector<OpRule> membership_rules() {
  OpRule op;
  op.name = "aten::isin";
  op.build = isin;
  op.supports = isin_supported;
  op.cacheable = true;  // programs follow from shapes, dtypes and the scalars
  OpRule uq;
  uq.name = "aten::_unique2";
  uq.build = unique;
  uq.supports = unique_supported;
  uq.shape_sync = true;
  return {op, uq};
}

}  // namespace neuronsim::kernels::ops
