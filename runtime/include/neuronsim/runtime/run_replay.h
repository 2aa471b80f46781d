#pragma once
// Re-timing a recorded run (run_log.h) on another preset: the log's calls made again on a
// runtime configured with it. Torch-free.
#include "neuronsim/runtime/run_log.h"
#include "neuronsim/runtime/runtime.h"

namespace neuronsim::runtime {

/// Runs a replayable log on `rt` (a runtime configured with the preset to re-time with, nothing
/// launched yet): the programs timing-only, the host charges at `rt`'s preset's costs.
void replay(const RunLog& log, Runtime& rt);

}  // namespace neuronsim::runtime
