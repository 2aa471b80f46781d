// Registers the boxed native kernel for every overload (functional, in-place, out) of every op
// the kernel library models. Ops without a CPU kernel of their own (composites) are left to
// decompose into native ops.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

#include "aten/native_boxed.h"

namespace neuronsim::backend {

void register_elementwise_timings();
void register_library_timings();

namespace {

std::string timing_key(std::string name) {
  if (name.size() > 1 && name.back() == '_') name.pop_back();
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

std::string timing_key_of(const std::string& name) {
  return timing_key(name);
}

void register_native_ops() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  register_elementwise_timings();
  register_library_timings();
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  auto& d = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : d.getAllOpNamesForDispatchKey(c10::DispatchKey::CPU)) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    if (!has_timing(timing_key(name.name))) continue;
    auto op = d.findOp(name);
    if (!op) continue;
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
