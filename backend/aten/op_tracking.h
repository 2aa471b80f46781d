#pragma once
// Which ATen ops ran on the simulated device and which took the CPU fallback, as TorchNeuron
// reports them: ATen ops called with neuron tensors (composite ops and factories too) under
// their full name with overload ("aten::where.self", "aten::zeros"), or the one name TorchNeuron
// logs for all overloads of its own kernels ("aten::empty", "aten::set_"). An op is a fallback
// when it or anything inside it took the CPU fallback; otherwise it is executed when it did
// device work (a device kernel, an allocation, a copy, a resize: it or an op inside it reached
// a backend kernel that is not a view), and not recorded at all when it only changed metadata
// (views, unsqueeze, atleast_2d, contiguous on a contiguous tensor), which TorchNeuron does not
// count as executed either. The ops are seen by a RecordFunction observer (op_observer.h); the
// backend's kernels report to the ops open on their thread (kernel_report.h).
// Per-op counts for the report, a once-per-op warning for fallbacks, NEURON_SIM_STRICT=1
// turning a fallback into an error, TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 turning
// one of an op with a device kernel into TorchNeuron's error.
#include <ATen/core/operator_name.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace neuronsim::backend {

struct OpCounts {
  uint64_t native = 0;
  uint64_t fallback = 0;
  uint64_t computed_at_32_bits = 0;  // runs with float64/int64 data computed at 32 bits
};

class OpTracker {
 public:
  static OpTracker& get();

  /// A kernel sent `op` to the CPU fallback (kernel_report.h counted it): throws c10::Error
  /// under NEURON_SIM_STRICT=1 or where TorchNeuron's switch forbids it, else warns once per op.
  void refuse_or_warn_fallback(const std::string& op, const std::string& reason);

  /// "aten::add.Tensor", "aten::zeros", "aten::empty": the name TorchNeuron reports.
  static std::string full_name(const c10::OperatorName& op);
  /// The stable id of a full op name ("aten::add.Tensor").
  int32_t intern(const std::string& full_name);
  /// One finished run of op `id`.
  void record(int32_t id, bool fallback, bool computed_at_32_bits);

  /// ISA mode: a native op whose outputs the CPU kernel still wrote (`why` says which and why;
  /// docs/design.md lists them). Keyed by the kernel's full name, not the ops open around it.
  void isa_host(const c10::OperatorName& op, const std::string& why);
  /// {op: why} since the last clear().
  std::map<std::string, std::string> isa_host_ops() const;

  std::set<std::string> executed() const;
  std::set<std::string> fallbacks() const;
  std::map<std::string, OpCounts> counts() const;
  void clear();
  bool strict() const;

 private:
  std::vector<std::string> names_;
  std::map<std::string, int32_t> ids_;
  std::vector<OpCounts> counts_;  // by id
  std::set<std::string> warned_;
  std::map<std::string, std::string> isa_host_;
};

}  // namespace neuronsim::backend
