// Registers the boxed native kernel for every overload (functional, in-place, out) of every op
// in the op-family tables. Ops without a CPU kernel of their own (composites) are left to
// decompose into native ops.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <unordered_map>

#include "aten/native_boxed.h"
#include "aten/native_ops.h"
#include "aten/torch_op_call.h"
#include "neuronsim/kernels/ops/op_rule.h"

namespace neuronsim::backend {

namespace {

// An op of the torch-free op library as the boxed kernel runs it.
NativeOp from_rule(const kernels::ops::OpRule& rule) {
  NativeOp op;
  op.name = rule.name;
  op.build = [&rule](const OpInvocation& inv) { return rule.build(TorchOpCall(inv)); };
  if (rule.supports)
    op.supports = [&rule](const OpInvocation& inv) { return rule.supports(TorchOpCall(inv)); };
  op.shape_sync = rule.shape_sync;
  op.writes = rule.writes;
  op.cacheable = rule.cacheable;
  op.isa_host_values = rule.host_values_reason;
  // The _foreach_* ops' values come from their CompositeExplicitAutograd kernels (they have no
  // CPU kernel of their own).
  op.composite = rule.name.rfind("aten::_foreach_", 0) == 0;
  return op;
}

// Every op family's table, by base name.
const std::unordered_map<std::string, NativeOp>& native_ops() {
  static const auto ops = [] {
    std::unordered_map<std::string, NativeOp> all;
    for (const kernels::ops::OpRule& rule : kernels::ops::op_rules()) {
      if (rule.build && rule.name.rfind("aten::", 0) == 0) all[rule.name] = from_rule(rule);
    }
    for (auto table : {attention_host_values, recurrent_host_values, sync_batch_norm_host_values}) {
      for (auto& [name, values] : table()) all.at(name).host_values = std::move(values);
    }
    return all;
  }();
  return ops;
}

// In-place overloads share their functional op's entry (dunder names such as __lshift__ keep
// theirs: __ilshift__ is the in-place one).
std::string base_name(std::string name) {
  const bool dunder = name.size() > 2 && name.compare(name.size() - 2, 2, "__") == 0;
  if (name.size() > 1 && name.back() == '_' && !dunder) name.pop_back();
  return name;
}

bool is_view(const c10::FunctionSchema& s) {
  for (const auto& r : s.returns()) {
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  }
  return false;
}

bool takes_generator(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments()) {
    if (a.type()->str().find("Generator") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

const NativeOp* find_native_op(const std::string& name) {
  const auto& ops = native_ops();
  auto it = ops.find(base_name(name));
  return it == ops.end() ? nullptr : &it->second;
}

void register_native_ops() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  auto& d = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : d.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    const NativeOp* native = find_native_op(name.name);
    if (!native) continue;
    auto op = d.findOp(name);
    if (!op) continue;
    // Overloads with a CPU kernel; with a CompositeExplicitAutograd one when the op asks for
    // it; with none (or a composite that only says "not implemented", as the
    // _scaled_dot_product_fused_attention_overrideable hook for PrivateUse1) when the op
    // computes its values itself.
    const bool cpu = op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    const bool composite = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
    const bool implicit = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    if (!cpu && !(native->composite && composite) && !(native->host_values && !implicit)) continue;
    const auto& schema = op->schema();
    if (is_view(schema) || takes_generator(schema)) continue;
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    const std::string full = name.overload_name.empty()
                                 ? name.name.substr(6)
                                 : name.name.substr(6) + "." + name.overload_name;
    lib->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&native_boxed_kernel>());
  }
}

}  // namespace neuronsim::backend
