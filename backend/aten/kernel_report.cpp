#include "aten/kernel_report.h"

#include "aten/op_observer.h"
#include "aten/op_tracking.h"

namespace neuronsim::backend {

void report_native_kernel(const c10::OperatorName& op, bool computed_at_32_bits) {
  if (open_tracked_ops() > 0) {
    note_native_in_open_ops();
    if (computed_at_32_bits) note_32bit_in_open_ops();
    return;
  }
  OpTracker& t = OpTracker::get();
  t.record(t.intern(OpTracker::full_name(op)), false, computed_at_32_bits);
}

void report_fallback_kernel(const std::string& op, const std::string& reason) {
  // Counted before the strict check: an op refused under NEURON_SIM_STRICT=1 is a fallback op.
  OpTracker& t = OpTracker::get();
  if (open_tracked_ops() > 0)
    note_fallback_in_open_ops();
  else
    t.record(t.intern(op), true, false);
  t.refuse_or_warn_fallback(op, reason);
}

}  // namespace neuronsim::backend
