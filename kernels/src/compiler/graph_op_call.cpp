#include "graph_op_call.h"

#include <stdexcept>

#include "neuronsim/kernels/compiler/fusion.h"

namespace neuronsim::kernels::compiler {

using ops::ArgKind;
using ops::TensorArg;

const Arg* GraphOpCall::find(std::string_view arg) const {
  for (const auto& [name, a] : node_.args) {
    if (name == arg) return &a;
  }
  return nullptr;
}

TensorArg GraphOpCall::value(int v) const {
  TensorArg t;
  if (v < 0) return t;
  const TensorMeta& m = g_.value(v).meta;
  t.defined = true;
  t.on_device = m.on_device;
  t.type = ops::parse_type_name(m.type_name);
  t.desc.address = virtual_address(v);
  t.desc.dtype = m.dtype;
  t.desc.sizes = m.sizes;
  // 64-bit data as its low 32-bit words, as the eager backend describes it.
  const int64_t widen = ops::is_64bit(t.type) ? 2 : 1;
  for (int64_t s : m.strides) t.desc.strides.push_back(s * widen);
  return t;  // no host data: a rule that reads values does not compile
}

ArgKind GraphOpCall::kind(std::string_view arg) const {
  const Arg* a = find(arg);
  if (!a) return ArgKind::kAbsent;
  switch (a->kind) {
    case Arg::Kind::kNone:
      return ArgKind::kNone;
    case Arg::Kind::kTensor:
      return a->value >= 0 ? ArgKind::kTensor : ArgKind::kNone;
    case Arg::Kind::kTensors:
      return ArgKind::kTensors;
    case Arg::Kind::kInt:
      return ArgKind::kInt;
    case Arg::Kind::kInts:
      return ArgKind::kInts;
    case Arg::Kind::kFloat:
      return ArgKind::kFloat;
    case Arg::Kind::kFloats:
      return ArgKind::kFloats;
    case Arg::Kind::kBool:
      return ArgKind::kBool;
    case Arg::Kind::kString:
      return ArgKind::kString;
  }
  return ArgKind::kNone;
}

TensorArg GraphOpCall::tensor(std::string_view arg) const {
  const Arg* a = find(arg);
  return a && a->kind == Arg::Kind::kTensor ? value(a->value) : TensorArg{};
}

TensorArg GraphOpCall::tensor(size_t index) const {
  if (index >= node_.args.size()) return {};
  const Arg& a = node_.args[index].second;
  return a.kind == Arg::Kind::kTensor ? value(a.value) : TensorArg{};
}

std::vector<TensorArg> GraphOpCall::tensors(std::string_view arg) const {
  std::vector<TensorArg> out;
  const Arg* a = find(arg);
  if (a && a->kind == Arg::Kind::kTensors) {
    for (int v : a->values) out.push_back(value(v));
  }
  return out;
}

double GraphOpCall::number(std::string_view arg, double fallback) const {
  const Arg* a = find(arg);
  if (!a || a->is_none()) return fallback;
  if (a->kind == Arg::Kind::kTensor) {
    // A host scalar tensor's value is data the graph does not hold.
    throw std::invalid_argument(std::string(arg) + " is a tensor whose value is known at run time");
  }
  if (a->kind == Arg::Kind::kInt || a->kind == Arg::Kind::kFloat || a->kind == Arg::Kind::kBool)
    return a->as_double();
  return fallback;
}

int64_t GraphOpCall::integer(std::string_view arg, int64_t fallback) const {
  const Arg* a = find(arg);
  if (!a || a->is_none()) return fallback;
  if (a->kind == Arg::Kind::kInt) return a->i;
  if (a->kind == Arg::Kind::kBool) return a->b ? 1 : 0;
  return static_cast<int64_t>(number(arg, static_cast<double>(fallback)));
}

std::vector<double> GraphOpCall::numbers(std::string_view arg) const {
  const Arg* a = find(arg);
  if (!a) return {};
  if (a->kind == Arg::Kind::kFloats) return a->floats;
  std::vector<double> out;
  if (a->kind == Arg::Kind::kInts) {
    for (int64_t i : a->ints) out.push_back(static_cast<double>(i));
  }
  return out;
}

std::vector<int64_t> GraphOpCall::ints(std::string_view arg) const {
  const Arg* a = find(arg);
  if (!a || a->is_none()) return {};
  if (a->kind == Arg::Kind::kInt) return {a->i};
  return a->ints;
}

std::string GraphOpCall::str(std::string_view arg) const {
  const Arg* a = find(arg);
  return a && a->kind == Arg::Kind::kString ? a->s : std::string();
}

std::optional<ops::ScalarType> GraphOpCall::scalar_type(std::string_view arg) const {
  // The framework side passes dtypes as their names ("float32").
  const Arg* a = find(arg);
  if (!a || a->kind != Arg::Kind::kString) return std::nullopt;
  return ops::parse_type_name(a->s);
}

TensorArg GraphOpCall::output(size_t i) const {
  return i < node_.outputs.size() ? value(node_.outputs[i]) : TensorArg{};
}

TensorArg GraphOpCall::count() const {
  throw std::invalid_argument(node_.op + ": its output size is known only from the data");
}

}  // namespace neuronsim::kernels::compiler
