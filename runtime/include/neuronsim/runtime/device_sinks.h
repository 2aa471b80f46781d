#pragma once
// Several observers may watch the device at once (the whole-program trace, torch.profiler):
// each attaches its sink under its role and the device sees one tee of all of them.
#include "neuronsim/runtime/runtime.h"
#include "neuronsim/sim/trace_sink.h"

namespace neuronsim::runtime {

// kKernelLines: an NKI launch that reports time per source line (python/neuronsim/nki).
enum class SinkRole { kTraceSession = 0, kProfiler = 1, kKernelLines = 2 };

/// Attaches (or with null, detaches) the sink for a role; call with the runtime lock held.
void set_device_sink(Runtime& rt, SinkRole role, sim::TraceSink* sink);

}  // namespace neuronsim::runtime
