// neuronsim._C's graph compiler entry points: describe a graph, compile it, run it.
#include "python/graph_bindings.h"
#include "host_stages.h"

#include <torch/extension.h>

#include <memory>
#include <optional>
#include <stdexcept>

#include "accelerator/context.h"
#include "aten/capture_mode.h"
#include "aten/device_tensor.h"
#include "aten/op_observer.h"
#include "aten/op_tracking.h"
#include "compiled_graph/compiled_graph.h"
#include "compiled_graph/host_run.h"
#include "neuronsim/sim/host_profile.h"

namespace py = pybind11;

namespace neuronsim::backend {
namespace {

using kernels::graph::Arg;
using kernels::graph::Graph;

device_model::DType dtype_of(const std::string& type) {
  using device_model::DType;
  if (type == "bfloat16") return DType::kBf16;
  if (type == "float16") return DType::kFp16;
  if (type == "float8_e4m3fn") return DType::kFp8E4M3;
  if (type == "float8_e5m2") return DType::kFp8E5M2;
  if (type == "int32" || type == "int64") return DType::kInt32;
  if (type == "int16") return DType::kInt16;
  if (type == "int8") return DType::kInt8;
  if (type == "uint8" || type == "bool") return DType::kUint8;
  return DType::kFp32;
}

// Python argument -> Arg: None, bool, int, float, str, ("tensor", id), ("tensors", [ids]) and
// lists of ints or floats.
Arg to_arg(const py::handle& o) {
  if (o.is_none()) return Arg::none();
  if (py::isinstance<py::bool_>(o)) return Arg::boolean(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) return Arg::integer(o.cast<int64_t>());
  if (py::isinstance<py::float_>(o)) return Arg::number(o.cast<double>());
  if (py::isinstance<py::str>(o)) return Arg::string(o.cast<std::string>());
  if (py::isinstance<py::tuple>(o)) {
    auto t = o.cast<py::tuple>();
    const auto tag = t[0].cast<std::string>();
    if (tag == "tensor") return Arg::tensor(t[1].cast<int>());
    if (tag == "tensors") return Arg::tensors(t[1].cast<std::vector<int>>());
    throw std::invalid_argument("unknown argument tag " + tag);
  }
  if (py::isinstance<py::list>(o)) {
    auto l = o.cast<py::list>();
    bool floats = false;
    for (const auto& e : l) floats |= py::isinstance<py::float_>(e);
    if (floats) return Arg::numbers(l.cast<std::vector<double>>());
    return Arg::integers(l.cast<std::vector<int64_t>>());
  }
  return Arg::string(py::str(o).cast<std::string>());
}

thread_local std::vector<std::unique_ptr<CaptureScope>> t_scopes;

py::dict report(const CompiledGraphRun& run) {
  const auto& cg = run.compiled();
  const auto& g = cg.lowered.graph;
  py::dict d;
  py::list nodes;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    py::dict n;
    n["name"] = g.nodes()[i].name;
    n["op"] = g.nodes()[i].op;
    n["class"] = kernels::compiler::node_class_name(cg.node_class[i]);
    n["region"] = cg.node_region[i];
    n["reason"] = cg.node_reason[i];
    nodes.append(n);
  }
  d["nodes"] = nodes;
  py::list regions;
  for (size_t r = 0; r < cg.partition.regions.size(); ++r) {
    const auto& region = cg.partition.regions[r];
    py::dict x;
    x["name"] = cg.region_name[r];
    const char* kinds[] = {"tile", "matmul", "eager", "host", "attention", "kernel"};
    x["kind"] = kinds[static_cast<int>(region.kind)];
    x["segment"] = region.segment;
    py::list ns;
    for (int n : cg.region_nodes[r]) ns.append(g.nodes().at(static_cast<size_t>(n)).name);
    x["nodes"] = ns;
    regions.append(x);
  }
  d["regions"] = regions;
  py::list segments;
  for (const auto& s : cg.segments) {
    py::dict x;
    x["values"] = s.values;
    x["host_node"] = s.host_node;
    x["parts"] = s.parts.size();  // 0: nothing to launch (between two host or collective nodes)
    x["prelinked"] = s.prelinked;
    x["instructions"] = s.prelinked ? s.linked.program.instruction_count() : 0;
    segments.append(x);
  }
  d["segments"] = segments;
  d["instructions"] = cg.instructions;
  d["attempts"] = cg.attempts;
  return d;
}

}  // namespace

void register_graph_bindings(py::module_& m) {
  py::class_<Graph>(m, "_GraphBuilder")
      .def(py::init<>())
      .def("add_value",
           [](Graph& g, const std::string& name, const std::string& type,
              const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
              int64_t storage_offset, bool on_device) {
             kernels::graph::TensorMeta m;
             m.type_name = type;
             m.dtype = dtype_of(type);
             m.sizes = sizes;
             m.strides = strides;
             m.storage_offset = storage_offset;
             m.on_device = on_device;
             return g.add_value(std::move(m), name);
           })
      .def("add_input", &Graph::add_input)
      .def("add_output", &Graph::add_output)
      .def("add_node",
           [](Graph& g, const std::string& name, const std::string& op, const std::string& overload,
              const py::list& args, const std::vector<int>& outputs, bool device_kernel) {
             kernels::graph::Node n;
             n.name = name;
             n.op = op;
             n.overload = overload;
             for (const auto& a : args) {
               auto t = a.cast<py::tuple>();
               n.args.emplace_back(t[0].cast<std::string>(), to_arg(t[1]));
             }
             n.outputs = outputs;
             n.device_kernel = device_kernel;
             g.add_node(std::move(n));
           })
      .def("compile", [](const Graph& g, const std::string& name) {
        const device_model::CoreParams core =
            with_runtime([](runtime::Runtime& r) { return r.device().params().core; });
        kernels::compiler::CompileOptions opt;
        opt.name = name;
        kernels::compiler::CompiledGraph cg;
        {
          py::gil_scoped_release release;
          cg = kernels::compiler::compile_graph(g, core, opt);
        }
        return std::make_shared<CompiledGraphRun>(std::move(cg));
      });
  py::class_<CompiledGraphRun, std::shared_ptr<CompiledGraphRun>>(m, "_CompiledGraph")
      .def("report", &report)
      .def("segment_values",
           [](const CompiledGraphRun& r, int s) {
             return r.compiled().segments.at(static_cast<size_t>(s)).values;
           })
      .def("begin", &CompiledGraphRun::begin)
      .def("launch", &CompiledGraphRun::launch);
  // Fast mode's one host call per graph (graph/host_run.h). Lists hold tensors and anything
  // else (passed through); `device` flags say which outputs belong on the device.
  py::class_<HostRun>(m, "_HostRun")
      .def(py::init<>())
      .def("views",
           [](HostRun& h, const py::list& xs) {
             sim::HostStageScope stage(stages::kDispatch);
             py::list out;
             for (const auto& x : xs) {
               if (THPVariable_Check(x.ptr())) {
                 const at::Tensor& t = THPVariable_Unpack(x.ptr());
                 out.append(is_neuron(t) ? h.view(t) : t);
               } else {
                 out.append(x);
               }
             }
             return out;
           })
      .def("to_device", [](HostRun& h, const py::sequence& xs, const std::vector<bool>& on_device,
                           bool program_values) {
        sim::HostStageScope stage(stages::kDispatch);
        TORCH_CHECK(xs.size() == on_device.size(), "neuronsim: ", xs.size(), " values, ",
                    on_device.size(), " flags");
        const c10::Device device =
            h.device().value_or(c10::Device(c10::DeviceType::PrivateUse1, current_device()));
        py::list out;
        for (size_t i = 0; i < on_device.size(); ++i) {
          py::handle x = xs[i];
          if (!on_device[i] || !THPVariable_Check(x.ptr())) {
            out.append(x);
            continue;
          }
          const at::Tensor& t = THPVariable_Unpack(x.ptr());
          out.append(program_values ? h.program_value(t, device) : h.to_device(t, device));
        }
        return out;
      });
  // A graph's host run as a context manager: `with _C._HostRunScope(h): ...`. Large allocations
  // come from the device memory of `h`'s device (HostAllocScope). RecordFunction is off, unless
  // thread-local callbacks (the profiler's) want to see the ops: the op observer would box every
  // CPU op's inputs only to ignore them, and HostRun.run counts the graph's ops itself.
  struct PyHostRunScope {
    std::optional<c10::Device> device;
    std::unique_ptr<HostAllocScope> alloc;
    std::unique_ptr<at::RecordFunctionGuard> record;
    std::unique_ptr<sim::HostStageScope> stage;  // the host values (NEURONSIM_HOST_PROFILE)
  };
  py::class_<PyHostRunScope>(m, "_HostRunScope")
      .def(py::init([](const HostRun& h) {
        return PyHostRunScope{h.device(), {}, {}, {}};
      }))
      .def("__enter__",
           [](PyHostRunScope& s) {
             s.stage = std::make_unique<sim::HostStageScope>(stages::kHostValues);
             s.alloc = std::make_unique<HostAllocScope>(s.device);
             if (!at::hasThreadLocalCallbacks()) {
               s.record = std::make_unique<at::RecordFunctionGuard>(false);
             }
           })
      .def("__exit__", [](PyHostRunScope& s, const py::args&) {
        s.record.reset();
        s.alloc.reset();
        s.stage.reset();
      });
  // Op tracking for nodes a compiled graph computed on the host (op_tracking.h): ids once per
  // graph, counts per run.
  m.def("_op_ids", [](const std::vector<std::string>& names) {
    std::vector<int32_t> ids;
    for (const auto& n : names) ids.push_back(OpTracker::get().intern(n));
    return ids;
  });
  m.def("_track_ops", [](const std::vector<int32_t>& ids) {
    if (!op_observer_enabled()) return;
    for (int32_t id : ids) OpTracker::get().record(id, false, false);
  });
  // Capture modes (aten/capture_mode.h) as a per-thread stack: 0 off, 1 fused, 2 eager node.
  m.def(
      "_capture_push",
      [](int mode, const std::shared_ptr<CompiledGraphRun>& run, int node) {
        const auto cm = static_cast<CaptureMode>(mode);
        std::vector<device_model::Program>* target =
            cm == CaptureMode::kCollect && run ? run->collect_target(node) : nullptr;
        t_scopes.push_back(std::make_unique<CaptureScope>(cm, target));
      },
      py::arg("mode"), py::arg("run") = nullptr, py::arg("node") = -1);
  m.def("_capture_pop", [] {
    if (!t_scopes.empty()) t_scopes.pop_back();
  });
}

}  // namespace neuronsim::backend
