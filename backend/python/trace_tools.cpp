#include "python/trace_tools.h"

#include <torch/extension.h>

#include <string>
#include <vector>

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/engines.h"
#include "neuronsim/traces/summary.h"
#include "neuronsim/traces/trace_reader.h"

namespace neuronsim::backend {

namespace py = pybind11;

void bind_trace_tools(py::module_& m) {
  // Translators run newest first: the syntax error (a format error too) is registered last.
  const auto& format_error =
      py::register_exception<traces::TraceFormatError>(m, "TraceFormatError", PyExc_ValueError);
  py::register_exception<traces::TraceSyntaxError>(m, "TraceSyntaxError", format_error.ptr());
  m.def(
      "_summary_document",
      [](const std::string& text, const std::string& origin, bool accept_summary) {
        std::string out;
        {
          py::gil_scoped_release release;
          out = traces::summary_document(text, origin, accept_summary).dump();
        }
        return out;
      },
      py::arg("text"), py::arg("origin"), py::arg("accept_summary") = false);
  // The same, reading the file as it streams (a long run's trace is never in memory whole).
  m.def(
      "_summary_document_file",
      [](const std::string& path, bool accept_summary) {
        std::string out;
        {
          py::gil_scoped_release release;
          out = traces::summary_document_file(path, accept_summary).dump();
        }
        return out;
      },
      py::arg("path"), py::arg("accept_summary") = false);
  m.def("_trace_metadata_file", [](const std::string& path) {
    std::string out;
    {
      py::gil_scoped_release release;
      out = traces::trace_metadata_file(path).dump();
    }
    return out;
  });
  m.def("_summary_diff", [](const std::string& a, const std::string& b) {
    return traces::diff_json(nlohmann::json::parse(a), nlohmann::json::parse(b)).dump();
  });
  m.def("_sort_engine_labels", [](std::vector<std::string> labels) {
    traces::sort_engine_labels(labels);
    return labels;
  });
  m.def("_summary_format", [] { return std::string(traces::kSummaryFormat); });
  // The device model's engine table (device/engines.h), for the tools' engine names.
  m.def("_engines", [] {
    py::list out;
    for (const device_model::EngineInfo& e : device_model::kEngines) {
      py::dict d;
      d["stream"] = std::string(e.stream);
      d["row"] = std::string(e.row);
      d["unit_row"] = std::string(e.unit_row);
      d["compute"] = e.compute;
      out.append(d);
    }
    return out;
  });
  m.def("_preset_names", [] { return device_model::Config::builtin_names(); });
  // Why a preset name does not load ("" when it does): the runtime's message, with a suggestion.
  m.def("_preset_error", [](const std::string& name) {
    try {
      device_model::Config::load(name);
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
  m.def("_preset_text", [](const std::string& name) {
    return std::string(device_model::Config::builtin_text(name));
  });
}

}  // namespace neuronsim::backend
