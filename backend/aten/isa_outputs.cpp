#include "aten/isa_outputs.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <optional>

#include "aten/device_tensor.h"
#include "aten/map_tensors.h"

namespace neuronsim::backend {

namespace {

struct MetaArg {
  at::Tensor device;
  at::Tensor meta;
};

at::Tensor to_meta(const at::Tensor& t, std::vector<MetaArg>& seen) {
  if (!is_neuron(t)) return t;  // CPU scalars and CPU indices stay as they are
  for (const MetaArg& s : seen) {
    if (s.device.is_same(t)) return s.meta;  // a tensor passed twice stays one tensor
  }
  at::Tensor m = at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
  seen.push_back({t, m});
  return m;
}

c10::IValue meta_arg(const c10::IValue& v, std::vector<MetaArg>& seen) {
  return map_tensors(v, [&](const at::Tensor& t) { return to_meta(t, seen); });
}

// The device tensor a meta result stands for: its argument, or a fresh one (marked by
// `fresh`). Undefined if the result is a view of an argument.
at::Tensor device_result(const at::Tensor& meta, const std::vector<MetaArg>& seen,
                         const c10::Device& dev, bool* fresh) {
  *fresh = false;
  if (!meta.defined()) return meta;
  for (const MetaArg& s : seen) {
    if (s.meta.is_same(meta)) return s.device;
  }
  for (const MetaArg& s : seen) {
    if (meta.is_alias_of(s.meta)) return {};
  }
  *fresh = true;
  return at::empty_strided(meta.sizes(), meta.strides(), meta.options().device(dev));
}

void restore(torch::jit::Stack* stack, size_t base, const std::vector<c10::IValue>& args) {
  stack->resize(base);
  stack->insert(stack->end(), args.begin(), args.end());
}

// The out= argument that return `r` aliases (`Tensor(a!)` on both), if any.
std::optional<size_t> aliased_out_arg(const c10::FunctionSchema& schema, size_t r) {
  const c10::AliasInfo* ret = schema.returns()[r].alias_info();
  if (!ret || !ret->isWrite()) return std::nullopt;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* a = schema.arguments()[i].alias_info();
    if (a && a->isWrite() && a->beforeSets() == ret->beforeSets()) return i;
  }
  return std::nullopt;
}

}  // namespace

bool reads_out(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
               const at::Tensor& out) {
  bool reads = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].is_out()) continue;
    for_each_tensor(args[i],
                    [&](const at::Tensor& t) { reads |= is_neuron(t) && t.is_alias_of(out); });
  }
  return reads;
}

void poison(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  at::Tensor v = cpu_view(t);
  if (at::isFloatingType(t.scalar_type())) {
    v.fill_(std::numeric_limits<double>::quiet_NaN());
    return;
  }
  switch (t.element_size()) {
    case 1:
      v.view(at::kByte).fill_(0xA5);
      break;
    case 2:
      v.view(at::kShort).fill_(static_cast<int16_t>(0xA5A5));
      break;
    case 4:
      v.view(at::kInt).fill_(static_cast<int32_t>(0xA5A5A5A5u));
      break;
    default:
      v.view(at::kLong).fill_(static_cast<int64_t>(0xA5A5A5A5A5A5A5A5ull));
      break;
  }
}

bool isa_outputs_from_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t nret = schema.returns().size();
  const size_t base = stack->size() - nargs;
  const std::vector<c10::IValue> args(stack->begin() + static_cast<int64_t>(base), stack->end());
  std::vector<MetaArg> seen;
  c10::Device dev = c10::Device(c10::DeviceType::PrivateUse1, 0);
  for (size_t i = 0; i < nargs; ++i) {
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (is_neuron(t)) dev = t.device();
    });
    (*stack)[base + i] = meta_arg(args[i], seen);
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  } catch (const std::exception&) {
    restore(stack, base, args);  // no Meta kernel, or sizes that depend on values
    return false;
  }
  // Check everything before touching device tensors.
  bool ok = true;
  auto check = [&](const at::Tensor& m) {
    if (!m.defined()) return;
    if (is_64bit(m.scalar_type())) ok = false;
    bool is_arg = false;
    for (const MetaArg& s : seen) is_arg |= s.meta.is_same(m);
    if (!is_arg) {
      for (const MetaArg& s : seen) ok &= !m.is_alias_of(s.meta);
    }
  };
  for (size_t i = base; i < stack->size(); ++i) for_each_tensor((*stack)[i], check);
  for (size_t i = 0; i < nargs; ++i) {
    if (schema.arguments()[i].is_out()) for_each_tensor((*stack)[base + i], check);
  }
  // out= arguments are only in `seen` (the stack now holds the returns).
  for (size_t i = 0; i < nargs && ok; ++i) {
    if (!schema.arguments()[i].is_out()) continue;
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (t.defined() && is_64bit(t.scalar_type())) ok = false;
    });
  }
  if (!ok) {
    restore(stack, base, args);
    return false;
  }
  // out= arguments take the size the Meta kernel gave them and start poisoned.
  for (size_t i = 0; i < nargs; ++i) {
    if (!schema.arguments()[i].is_out()) continue;
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (!is_neuron(t)) return;
      for (const MetaArg& s : seen) {
        if (s.device.is_same(t) && !t.sizes().equals(s.meta.sizes())) t.resize_(s.meta.sizes());
      }
      if (!reads_out(schema, args, t)) poison(t);
    });
  }
  TORCH_INTERNAL_ASSERT(stack->size() == base + nret, "neuronsim: ", schema.name(),
                        "'s Meta kernel left ", stack->size() - base, " values for ", nret,
                        " returns");
  for (size_t i = base; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    // A return the schema aliases to an out= argument is that argument, whatever tensor the
    // Meta kernel returned (a Python out_wrapper may return its own fresh result).
    if (const auto arg = aliased_out_arg(schema, i - base)) {
      v = args[*arg];
      continue;
    }
    bool fresh = false;
    if (v.isTensor()) {
      at::Tensor t = device_result(v.toTensor(), seen, dev, &fresh);
      if (fresh) poison(t);
      v = t;
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& m : v.toTensorList()) {
        at::Tensor t = device_result(m, seen, dev, &fresh);
        if (fresh) poison(t);
        out.push_back(t);
      }
      v = out;
    }
  }
  return true;
}

}  // namespace neuronsim::backend
