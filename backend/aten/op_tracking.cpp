#include "aten/op_tracking.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

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

void OpTracker::record_native(const std::string& op, bool at32) {
  std::lock_guard<std::mutex> lock(g_mutex);
  executed_.insert(op);
  OpCounts& c = counts_[op];
  ++c.native;
  if (at32) ++c.computed_at_32_bits;
}

void OpTracker::record_fallback(const std::string& op, const std::string& reason) {
  TORCH_CHECK(!strict(), op, " is not implemented natively for the neuron device", reason,
              "; NEURON_SIM_STRICT=1 forbids the CPU fallback");
  bool warn = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    fallback_.insert(op);
    ++counts_[op].fallback;
    warn = warned_.insert(op).second;
  }
  if (warn) {
    TORCH_WARN("neuronsim: ", op, " is not implemented natively for the neuron device", reason,
               "; it runs on the CPU (data is copied through the simulated DMA, host time is "
               "charged). Set NEURON_SIM_STRICT=1 to make this an error.");
  }
}

std::set<std::string> OpTracker::executed() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return executed_;
}

std::set<std::string> OpTracker::fallbacks() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return fallback_;
}

std::map<std::string, OpCounts> OpTracker::counts() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return counts_;
}

void OpTracker::clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  executed_.clear();
  fallback_.clear();
  counts_.clear();
}

}  // namespace neuronsim::backend
