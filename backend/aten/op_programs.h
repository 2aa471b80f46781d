#pragma once
// A native op's programs: built by its rule (or found in the program cache) and launched through
// the calling thread's capture (op_capture.h). Every native op builds its programs here.
#include <c10/core/Device.h>

#include <vector>

#include "aten/native_ops.h"
#include "aten/op_values.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::backend {

class OpCapture;

/// Builds (or finds in the program cache) and launches the op's programs under `capture`. ISA
/// mode (`values.functional`): the arguments the CPU kernel wrote are first restored from
/// `values.snapshots` and the outputs it wrote poisoned, so the values are the programs'. A
/// data-dependent output size is read back from the device afterwards, as on the device.
void run_programs(const NativeOp& native, OpInvocation& inv, const ValuesOutcome& values,
                  const OpCapture& capture);

/// Launches programs through the calling thread's capture (eager: now, charging the host launch
/// overhead; inside a compiled graph: skipped or handed to the graph's launch). `functional`
/// runs them in full mode (ISA mode: the programs compute the values). `validated`: they come
/// from the program cache (validated on their first launch).
void launch_programs(const c10::Device& device, const std::vector<device_model::Program>& programs,
                     bool functional, bool validated = false);

}  // namespace neuronsim::backend
