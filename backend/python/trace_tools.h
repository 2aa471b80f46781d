#pragma once
// The torch-free tools behind the `neuronsim` CLI, bound into neuronsim._C: trace summaries and
// their comparison (traces/), and the built-in presets (device_model/).
#include <torch/csrc/utils/pybind.h>

namespace neuronsim::backend {

/// Adds _summary_document(_file), _trace_metadata_file, _summary_diff, _sort_engine_labels,
/// _summary_format, _preset_names, _preset_text and the TraceFormatError / TraceSyntaxError
/// exceptions to the module.
void bind_trace_tools(pybind11::module_& m);

}  // namespace neuronsim::backend
