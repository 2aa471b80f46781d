// neuronsim._C's distributed entry points: the neuron c10d backend (created by
// python/neuronsim/distributed from the Gloo group it owns) and the per-core collective totals.
#include <torch/csrc/utils/pybind.h>

#include "accelerator/context.h"
#include "aten/device_tensor.h"
#include "distributed/bindings.h"
#include "distributed/neuron_backend.h"

namespace py = pybind11;

namespace neuronsim::backend::distributed {

void register_bindings(py::module_& m) {
  py::class_<NeuronBackend, c10d::Backend, c10::intrusive_ptr<NeuronBackend>>(
      m, "_NeuronBackend", "The neuron c10d backend: collectives on neuron tensors over Gloo.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo, int rank, int size,
                       int device, const std::string& group,
                       const std::vector<std::pair<uint32_t, uint32_t>>& places,
                       int64_t inline_bytes, int64_t timeout_ms, int ranks_per_process) {
             BackendOptions o;
             o.device = static_cast<c10::DeviceIndex>(device);
             o.group = group;
             for (const auto& [instance, core] : places) o.places.push_back({instance, core});
             o.inline_bytes = inline_bytes;
             o.timeout = std::chrono::milliseconds(timeout_ms);
             o.ranks_per_process = ranks_per_process;
             return c10::make_intrusive<NeuronBackend>(rank, size, gloo, std::move(o));
           }),
           py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("device"), py::arg("group"),
           py::arg("places"), py::arg("inline_bytes"), py::arg("timeout_ms"),
           py::arg("ranks_per_process") = 1, py::call_guard<py::gil_scoped_release>());

  m.def(
      "_host_view",
      [](const at::Tensor& t) {
        TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
                    "_host_view takes a neuron tensor, got one on ", t.device());
        return cpu_view(t);
      },
      "A CPU tensor aliasing a neuron tensor's memory (simulated HBM is host memory): the "
      "collective benchmark runs plain Gloo on the same buffers.");

  m.def("_collective_totals", [] {
    py::dict out;
    if (!runtime::Runtime::initialized()) return out;
    with_runtime([&](runtime::Runtime& r) {
      for (const auto& [core, t] : r.collectives().totals()) {
        py::dict d;
        d["count"] = t.count;
        d["busy_ns"] = t.busy.ns();
        d["waited_ns"] = t.waited.ns();
        out[py::int_(core)] = d;
      }
      return 0;
    });
    return out;
  });

  m.def("_instance_cores", [] {
    // Logical NeuronCores of one instance of the configured preset, every one visible.
    runtime::RuntimeConfig c = runtime::Runtime::pending();
    c.visible_cores.clear();
    try {
      return runtime::Runtime::visible_device_count(c);
    } catch (...) {
      rethrow_as_torch_error();
    }
  });

  m.def("_interconnect", [] {
    return with_runtime([](runtime::Runtime& r) {
      const device_model::interconnect::InterconnectParams& p = r.interconnect();
      py::dict d;
      d["instance"] = p.instance_name;
      d["chips"] = p.chips;
      d["torus_rows"] = p.torus_rows;
      d["torus_cols"] = p.torus_cols;
      d["cores_per_chip"] = p.cores_per_chip;
      d["cores_per_instance"] = p.cores_per_instance();
      d["link_bytes_per_s"] = p.link_bytes_per_s;
      d["network_bytes_per_s"] = p.network_bytes_per_s;
      d["network_latency_ns"] = p.network_latency_ns;
      d["dma_bytes_per_s"] = p.dma_bytes_per_s;
      d["algorithm"] = device_model::interconnect::algorithm_name(p.algorithm);
      d["inter_instance"] =
          p.inter_instance == device_model::interconnect::InterInstance::kHierarchical
              ? "hierarchical"
              : "flat";
      d["launch_overhead_ns"] = p.launch_overhead_ns;
      d["step_latency_ns"] = p.step_latency_ns;
      return d;
    });
  });
}

}  // namespace neuronsim::backend::distributed
