#pragma once
// The native ops: each op family's file (mirroring the kernel library's files) exports a table
// of {ATen base name, timing builder, support check}; registration iterates the tables. How a
// native op runs is in native_boxed.h.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>
#include <vector>

#include "aten/device_tensor.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::backend {

/// What a timing builder sees: the op's device inputs (as passed) and device outputs.
struct OpInvocation {
  std::string name;  // "aten::add"
  const c10::FunctionSchema* schema = nullptr;
  std::vector<c10::IValue> args;    // original arguments (device tensors)
  std::vector<at::Tensor> outputs;  // device outputs (returns, flattened)
  at::Tensor count;                 // shape_sync ops: one int32 of device memory for the count
  c10::Device device{c10::DeviceType::PrivateUse1, 0};
  /// What the builders need of the device, filled in under the runtime lock: the core's
  /// parameters and the HBM address of device memory.
  const device_model::CoreParams* core_params = nullptr;
  HbmAddressOf hbm_address;
  /// Physical cores the op's launch may span (chip.logical_core_size; 1 inside a compiled graph,
  /// whose linker joins single-core programs): the kernels that split their work across a
  /// logical core's cores (kernels/spmd.h) read it.
  uint32_t grid = 1;

  const device_model::CoreParams& core() const { return *core_params; }
  /// A device tensor as the kernel library sees it.
  kernels::TensorDesc describe(const at::Tensor& t) const {
    return backend::describe(t, hbm_address);
  }

  /// The i-th argument as a tensor (undefined if it is not one).
  at::Tensor tensor(size_t i) const;
  /// The argument named `name` (throws if absent).
  const c10::IValue& arg(const std::string& name) const;
  bool has_arg(const std::string& name) const;
  double scalar(const std::string& name, double fallback) const;
  /// An int[] / SymInt[] argument (concrete sizes).
  std::vector<int64_t> ints(const std::string& name) const;
};

/// Builds the ISA programs that model an op's device time.
using TimingBuilder = std::function<std::vector<device_model::Program>(const OpInvocation&)>;

/// Whether the kernel library handles this invocation (dtypes, shapes); checked before anything
/// runs, so an unsupported case takes the CPU fallback instead.
using SupportCheck = std::function<bool(const OpInvocation&)>;

/// An op's values on the CPU views of its arguments, for ops the CPU has no kernel for: a boxed
/// kernel (arguments on the stack, returns left on it).
using HostValues = std::function<void(const c10::OperatorHandle&, torch::jit::Stack*)>;

struct NativeOp {
  std::string name;  // ATen base name: "aten::add" covers add, add_ and add.out
  TimingBuilder build;
  SupportCheck supports;  // null: every invocation
  /// Also registers the overloads whose only kernel is CompositeExplicitAutograd (the _foreach_*
  /// ops): their values come from that kernel on the CPU views, their time from one launch.
  bool composite = false;
  /// Values for overloads without any CPU kernel (null: the CPU kernel computes them).
  HostValues host_values;
  /// A data-dependent output shape (nonzero, masked_select): the program writes the element
  /// count to `OpInvocation::count` and the host reads it back, a device-to-host sync.
  bool shape_sync = false;
  /// Arguments the op writes that its schema does not mark as written (native_batch_norm's
  /// running statistics): ISA mode restores them, like marked ones, before the programs run.
  std::vector<std::string> writes = {};
  /// Its programs depend only on what program_key.h keys on (not on tensor values or state):
  /// set per op family in native_registrations.cpp.
  bool cacheable = false;
  /// Non-null: ISA mode keeps the CPU kernel's values for this op, for the reason given (its
  /// program models the time but not yet the values; docs/design.md lists these).
  const char* isa_host_values = nullptr;
};
using NativeOpTable = std::vector<NativeOp>;

// One table per op family, each defined in the file of its name.

/// Values of ops without a CPU kernel, by base name (native_registrations.cpp attaches them to
/// the op library's rules).
using HostValueTable = std::vector<std::pair<std::string, HostValues>>;
HostValueTable attention_host_values();        // aten/attention.cpp: the fused sdpa op
HostValueTable recurrent_host_values();        // aten/recurrent.cpp: the fused RNN cells
HostValueTable sync_batch_norm_host_values();  // aten/sync_batch_norm.cpp: SyncBatchNorm's ops

/// The native op of an overload's base name ("aten::add_" -> aten::add), or null.
const NativeOp* find_native_op(const std::string& name);

/// Registers the boxed native kernel for every overload (functional, in-place, out) of every
/// op in the tables (once).
void register_native_ops();

}  // namespace neuronsim::backend
