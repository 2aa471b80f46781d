// ISA mode's values (NEURON_SIM_MODE=isa): the op's programs compute them. Its outputs are sized
// by the op's Meta kernel and start poisoned (isa_outputs.h); the CPU kernel does not run. Ops
// the Meta kernel cannot size (none registered, data-dependent sizes) run the CPU kernel for the
// sizes; what it wrote is restored or poisoned before the programs run. Host values remain
// where the programs cannot compute: 64-bit data has no exact 32-bit view in HBM (programs see
// low words), and ops whose rule names a reason (NativeOp::isa_host_values).
#include <algorithm>
#include <string>

#include "accelerator/context.h"
#include "aten/cpu_fallback.h"
#include "aten/device_tensor.h"
#include "aten/host_kernel_call.h"
#include "aten/isa_outputs.h"
#include "aten/op_tracking.h"
#include "aten/op_values.h"

namespace neuronsim::backend {
namespace {

// Whether the programs can compute the op's values from these arguments. CPU 0-dim tensors
// (wrapped Python scalars) are read on the host as immediates. The low word of an int64 is the
// value computed at 32 bits (emulated 64-bit data); a double's is not.
bool programs_compute(const NativeOp& native, const OpInvocation& inv) {
  if (native.isa_host_values) return false;
  bool ok = true;
  for (const c10::IValue& v : inv.args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (is_neuron(t) && is_64bit(t.scalar_type()) &&
          (t.scalar_type() != at::kLong || !emulate_64bit()))
        ok = false;
    });
  }
  return ok;
}

void flatten_returns(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                     std::vector<at::Tensor>& outputs) {
  for (const auto& r : torch::jit::last(stack, op.schema().returns().size())) {
    for_each_tensor(r, [&](const at::Tensor& t) { outputs.push_back(t); });
  }
}

// Copies of the arguments the op writes (a mutated tensor or tensor list, the _foreach_*_ ops;
// writes the schema does not mark are listed by the rule).
std::vector<std::pair<at::Tensor, at::Tensor>> written_arguments(const c10::FunctionSchema& schema,
                                                                 const NativeOp& native,
                                                                 const OpInvocation& inv) {
  std::vector<std::pair<at::Tensor, at::Tensor>> snapshots;
  for (size_t i = 0; i < inv.args.size(); ++i) {
    const auto& alias = schema.arguments()[i].alias_info();
    const bool writes = (alias && alias->isWrite()) ||
                        std::find(native.writes.begin(), native.writes.end(),
                                  schema.arguments()[i].name()) != native.writes.end();
    if (writes) {
      for_each_tensor(inv.args[i], [&](const at::Tensor& t) {
        if (is_neuron(t)) snapshots.emplace_back(t, cpu_view(t).clone());
      });
    }
  }
  return snapshots;
}

// What the CPU kernel wrote that the programs write: fresh outputs, and out= arguments the op
// does not also read.
std::vector<at::Tensor> host_written_outputs(const c10::FunctionSchema& schema,
                                             const OpInvocation& inv) {
  std::vector<at::Tensor> poisoned;
  for (const at::Tensor& t : inv.outputs) {
    bool is_arg = false;
    for (const c10::IValue& v : inv.args) {
      for_each_tensor(v, [&](const at::Tensor& a) { is_arg |= is_neuron(a) && a.is_same(t); });
    }
    if (!is_arg) poisoned.push_back(t);
  }
  for (size_t i = 0; i < inv.args.size(); ++i) {
    if (schema.arguments()[i].is_out())
      for_each_tensor(inv.args[i], [&](const at::Tensor& t) {
        if (is_neuron(t) && !reads_out(schema, inv.args, t)) poisoned.push_back(t);
      });
  }
  return poisoned;
}

class IsaValues final : public ValuesMode {
 public:
  ValuesOutcome compute(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                        const NativeOp& native, OpInvocation& inv) const override {
    const auto& schema = op.schema();
    ValuesOutcome out;
    out.functional = programs_compute(native, inv);
    if (out.functional && !native.shape_sync && isa_outputs_from_meta(op, stack)) {
      flatten_returns(op, *stack, inv.outputs);
      return out;
    }
    if (out.functional) out.snapshots = written_arguments(schema, native, inv);
    if (!run_host_kernel(op, stack, native, inv, &out.at32)) {
      // The CPU kernel lacks the dtype: the fallback's widened host values, as in fast mode.
      run_on_host(op, stack);
      flatten_returns(op, *stack, inv.outputs);
      return ValuesOutcome{};
    }
    for (const at::Tensor& t : inv.outputs) {
      if (t.defined() && is_64bit(t.scalar_type())) out.functional = false;
    }
    if (out.functional) {
      out.poisoned = host_written_outputs(schema, inv);
      OpTracker::get().isa_host(op.operator_name(),
                                native.shape_sync
                                    ? "outputs sized by the CPU kernel (data-dependent size)"
                                    : "outputs sized by the CPU kernel (no usable Meta kernel)");
    } else {
      out.snapshots.clear();
      OpTracker::get().isa_host(op.operator_name(),
                                native.isa_host_values
                                    ? std::string("host values (") + native.isa_host_values + ")"
                                    : std::string("host values (64-bit data)"));
    }
    return out;
  }
};

}  // namespace

const ValuesMode& isa_values() {
  static const IsaValues mode;
  return mode;
}

bool isa_mode() {
  return with_runtime([](runtime::Runtime& r) { return r.isa_mode(); });
}

}  // namespace neuronsim::backend
