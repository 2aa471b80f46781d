#include "aten/op_tracking.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "aten/native_ops.h"

namespace neuronsim::backend {
namespace {
std::mutex g_mutex;
}

OpTracker& OpTracker::get() {
  static OpTracker t;
  return t;
}

bool OpTracker::strict() const {
  const char* v = std::getenv("NEURON_SIM_STRICT");
  return v && std::strcmp(v, "1") == 0;
}

int32_t OpTracker::intern(const std::string& full_name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto [it, added] = ids_.emplace(full_name, static_cast<int32_t>(names_.size()));
  if (added) {
    names_.push_back(full_name);
    counts_.emplace_back();
  }
  return it->second;
}

void OpTracker::record(int32_t id, bool fallback, bool computed_at_32_bits) {
  std::lock_guard<std::mutex> lock(g_mutex);
  OpCounts& c = counts_.at(static_cast<size_t>(id));
  if (fallback) {
    ++c.fallback;
  } else {
    ++c.native;
    if (computed_at_32_bits) ++c.computed_at_32_bits;
  }
}

std::string OpTracker::full_name(const c10::OperatorName& op) {
  // TorchNeuron's own C++ kernels log one name for all their overloads
  // (torch_neuronx/csrc/aten/NeuronNativeFunctions.cpp).
  if ((op.name == "aten::empty" && op.overload_name == "memory_format") || op.name == "aten::set_")
    return op.name;
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

namespace {

bool fallback_only_for_unimplemented() {
  const char* v = std::getenv("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS");
  return v && std::strcmp(v, "1") == 0;
}

// "aten::add.Tensor" -> "aten::add": operator names hold no dot.
std::string base_of(const std::string& full) {
  return full.substr(0, full.find('.'));
}

}  // namespace

void OpTracker::refuse_or_warn_fallback(const std::string& op, const std::string& reason) {
  TORCH_CHECK(!strict(), op, " is not implemented natively for the neuron device", reason,
              "; NEURON_SIM_STRICT=1 forbids the CPU fallback");
  // TorchNeuron's switch: an op it implements falls back only when it has no implementation
  // at all, never because its implementation cannot take the arguments.
  TORCH_CHECK(!fallback_only_for_unimplemented() || find_native_op(base_of(op)) == nullptr,
              "CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. "
              "Operation ",
              op,
              " failed to be handled by any Neuron implementation (last implementation: "
              "neuronsim's device kernel). Details: the device kernel does not take these "
              "arguments",
              reason);
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    warn = warned_.insert(op).second;
  }
  if (warn) {
    TORCH_WARN("neuronsim: ", op, " is not implemented natively for the neuron device", reason,
               "; it runs on the CPU (data is copied through the simulated DMA, host time is "
               "charged). Set NEURON_SIM_STRICT=1 to make this an error.");
  }
}

void OpTracker::isa_host(const c10::OperatorName& op, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mutex);
  isa_host_[full_name(op)] = why;
}

std::map<std::string, std::string> OpTracker::isa_host_ops() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return isa_host_;
}

std::set<std::string> OpTracker::executed() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::set<std::string> out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i].native > 0) out.insert(names_[i]);
  }
  return out;
}

std::set<std::string> OpTracker::fallbacks() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::set<std::string> out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i].fallback > 0) out.insert(names_[i]);
  }
  return out;
}

std::map<std::string, OpCounts> OpTracker::counts() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::map<std::string, OpCounts> out;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i].native > 0 || counts_[i].fallback > 0) out.emplace(names_[i], counts_[i]);
  }
  return out;
}

void OpTracker::clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (OpCounts& c : counts_) c = OpCounts{};
  isa_host_.clear();
}

}  // namespace neuronsim::backend
