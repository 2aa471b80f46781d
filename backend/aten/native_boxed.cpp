#include "aten/native_boxed.h"
#include "host_stages.h"

#include <optional>
#include <string>

#include "aten/cpu_fallback.h"
#include "aten/kernel_report.h"
#include "aten/op_capture.h"
#include "aten/op_check.h"
#include "aten/op_observer.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "aten/op_values.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {

namespace {

// ISA mode computes with programs only in eager ops: a compiled graph's nodes take host values
// (the graph's own launch computes).
const ValuesMode& values_mode(const OpCapture& capture) {
  if (capture.eager() && isa_mode()) return isa_values();
  return fast_values();
}

void record_native(const c10::OperatorName& name, bool at32) {
  sim::HostStageScope stage(stages::kOpTracking);
  if (!in_fallback()) report_native_kernel(name, at32);
}

}  // namespace

void native_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const BackendKernelScope kernel_scope;
  sim::HostStageScope dispatch_stage(stages::kDispatch);
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();

  // Check: the device and its dtypes, then the rule's support for this call.
  const std::optional<c10::Device> device = native_device(op, stack);
  if (!device) return neuron_cpu_fallback(op, stack);
  const OpCapture& capture = op_capture();
  std::optional<OpScope> scope;
  if (capture.eager() && runtime::TraceSession::active()) {
    sim::HostStageScope stage(stages::kTrace);
    scope.emplace(schema.name(), c10::ArrayRef<c10::IValue>(
                                     &*(stack->end() - static_cast<int64_t>(nargs)), nargs));
  }
  OpInvocation inv;
  inv.name = schema.name();
  inv.schema = &schema;
  inv.device = *device;
  inv.args.assign(stack->end() - static_cast<int64_t>(nargs), stack->end());
  const NativeOp* native = find_native_op(inv.name);
  TORCH_INTERNAL_ASSERT(native, "neuronsim: native op ", inv.name, " has no timing");
  if (capture.builds_programs() && native->supports && !native->supports(inv))
    return neuron_cpu_fallback(op, stack);

  // Values, by the process's mode.
  const ValuesOutcome values = values_mode(capture).compute(op, stack, *native, inv);

  // Programs, through the capture.
  if (capture.builds_programs()) run_programs(*native, inv, values, capture);
  record_native(op.operator_name(), values.at32);
}

}  // namespace neuronsim::backend
