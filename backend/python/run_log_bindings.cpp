#include "python/run_log_bindings.h"

#include <torch/extension.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "accelerator/context.h"
#include "neuronsim/runtime/run_log.h"
#include "neuronsim/runtime/run_replay.h"

namespace neuronsim::backend {
namespace {

namespace py = pybind11;

std::unique_ptr<runtime::RunLog>& recording() {
  static std::unique_ptr<runtime::RunLog> log;
  return log;
}

}  // namespace

void bind_run_log(py::module_& m) {
  m.def("_run_log_start", [] {
    with_runtime([](runtime::Runtime& r) {
      if (recording()) throw std::runtime_error("a neuronsim run log is already being recorded");
      const runtime::RuntimeConfig& c = r.config();
      recording() =
          std::make_unique<runtime::RunLog>(nlohmann::json{{"preset", c.preset},
                                                           {"overrides", c.overrides},
                                                           {"visible_cores", c.visible_cores},
                                                           {"launch_blocking", c.launch_blocking}});
      r.set_run_log(recording().get());
      return 0;
    });
  });
  // Writes the log to `path`; returns {"launches", "programs", "replayable", "why_not"}.
  m.def("_run_log_stop", [](const std::string& path) {
    std::unique_ptr<runtime::RunLog> log = with_runtime([](runtime::Runtime& r) {
      r.set_run_log(nullptr);
      return std::move(recording());
    });
    if (!log) throw std::runtime_error("no neuronsim run log is being recorded");
    {
      py::gil_scoped_release release;
      std::ofstream out(path);
      out << log->to_json().dump();
      if (!out) throw std::runtime_error("cannot write the run log '" + path + "'");
    }
    py::dict d;
    d["launches"] = log->launches();
    d["programs"] = log->programs().size();
    d["replayable"] = log->replayable();
    d["why_not"] = log->why_not();
    return d;
  });
  // Re-times the log at `path` on this process's runtime (configured, nothing launched yet).
  m.def("_replay", [](const std::string& path) {
    py::gil_scoped_release release;
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot read the run log");
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception&) {
      throw std::runtime_error(path + ": not a neuronsim run log (not JSON)");
    }
    const runtime::RunLog log = runtime::RunLog::from_json(doc, path);
    with_runtime([&](runtime::Runtime& r) {
      runtime::replay(log, r);
      return 0;
    });
  });
}

}  // namespace neuronsim::backend
