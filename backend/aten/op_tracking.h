#pragma once
// Which ATen ops ran natively on the simulated device and which went to the CPU fallback, under
// TorchNeuron's names ("aten::add"): sets since the last clear, per-op counts for the report, a
// once-per-op warning for fallbacks, and NEURON_SIM_STRICT=1 turning a fallback into an error.
#include <c10/util/Exception.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace neuronsim::backend {

struct OpCounts {
  uint64_t native = 0;
  uint64_t fallback = 0;
  uint64_t computed_at_32_bits = 0;  // native runs on float64/int64 data
};

class OpTracker {
 public:
  static OpTracker& get();

  void record_native(const std::string& op, bool computed_at_32_bits);
  /// Records a fallback, warns once per op (TORCH_WARN), throws c10::Error under
  /// NEURON_SIM_STRICT=1.
  void record_fallback(const std::string& op, const std::string& reason);

  std::set<std::string> executed() const;
  std::set<std::string> fallbacks() const;
  std::map<std::string, OpCounts> counts() const;
  void clear();
  bool strict() const;

 private:
  std::set<std::string> executed_, fallback_, warned_;
  std::map<std::string, OpCounts> counts_;
};

}  // namespace neuronsim::backend
