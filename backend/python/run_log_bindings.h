#pragma once
// Recording a run's calls into the runtime and re-timing them under another preset
// (runtime/run_log.h), bound into neuronsim._C for `neuronsim run --record` and
// `neuronsim replay`.
#include <torch/csrc/utils/pybind.h>

namespace neuronsim::backend {

/// Adds _run_log_start, _run_log_stop and _replay to the module.
void bind_run_log(pybind11::module_& m);

}  // namespace neuronsim::backend
