#pragma once
// How a native neuron op runs ("fast" mode, docs/design.md): its values are computed by ATen's
// CPU kernel on zero-copy views of the device tensors, and its time by the kernel library's ISA
// program for the op, run through the device model's timing. 64-bit data is computed at 32 bits
// (rounded in and out) unless NEURON_SIM_EXACT_64BIT=1, as TorchNeuron documents for the device.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>
#include <vector>

#include "neuronsim/device/program.h"

namespace neuronsim::backend {

/// What a timing builder sees: the op's device inputs (as passed) and device outputs.
struct OpInvocation {
  std::string name;  // "aten::add"
  const c10::FunctionSchema* schema = nullptr;
  std::vector<c10::IValue> args;    // original arguments (device tensors)
  std::vector<at::Tensor> outputs;  // device outputs (returns, flattened)
  c10::Device device{c10::DeviceType::PrivateUse1, 0};

  /// The i-th argument as a tensor (undefined if it is not one).
  at::Tensor tensor(size_t i) const;
  /// The argument named `name` (throws if absent).
  const c10::IValue& arg(const std::string& name) const;
  bool has_arg(const std::string& name) const;
  double scalar(const std::string& name, double fallback) const;
};

/// Builds the ISA programs that model an op's device time.
using TimingBuilder = std::function<std::vector<device::Program>(const OpInvocation&)>;

/// Whether the kernel library handles this invocation (dtypes, shapes); checked before anything
/// runs, so an unsupported case takes the CPU fallback instead.
using SupportCheck = std::function<bool(const OpInvocation&)>;

/// Registers `builder` for the base op name and marks it native (the boxed kernel looks it up).
void register_timing(const std::string& base_name, TimingBuilder builder,
                     SupportCheck supports = nullptr);
bool has_timing(const std::string& base_name);

/// The boxed kernel every native op is registered with.
void native_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
/// The boxed CPU fallback (counted, warned once, an error under NEURON_SIM_STRICT=1).
void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

/// Launches an op's programs on its device, charging the host launch overhead. `functional`
/// runs them in full mode (ISA mode: the programs compute the values).
void launch_programs(const c10::Device& device, const std::vector<device::Program>& programs,
                     bool functional);
/// ISA mode is on for this process (NEURON_SIM_MODE=isa or neuronsim._C._set_isa_mode).
bool isa_mode();

/// True while the fallback runs (its internal copies are not counted as ops of their own).
bool in_fallback();

}  // namespace neuronsim::backend
