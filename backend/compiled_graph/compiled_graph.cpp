#include "compiled_graph/compiled_graph.h"
#include "host_stages.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "accelerator/context.h"
#include "aten/device_tensor.h"
#include "aten/native_boxed.h"
#include "aten/op_scope.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"
#include "profiler/activity_recorder.h"

namespace neuronsim::backend {

using kernels::compiler::Part;
using kernels::compiler::Region;

CompiledGraphRun::CompiledGraphRun(kernels::compiler::CompiledGraph cg)
    : cg_(std::move(cg)), validated_(cg_.segments.size(), false) {
  const auto& g = cg_.lowered.graph;
  std::set<int> written_roots;
  for (size_t v = 0; v < cg_.partition.stored_by.size(); ++v) {
    const int r = cg_.partition.stored_by[v];
    if (r < 0) continue;
    const auto kind = cg_.partition.regions[static_cast<size_t>(r)].kind;
    if (kernels::compiler::emits_program(kind)) {
      written_roots.insert(cg_.lowered.root[v]);
    }
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (written_roots.count(g.inputs()[i])) mutated_inputs_.push_back(static_cast<int>(i));
  }
}

std::vector<device_model::Program>* CompiledGraphRun::collect_target(int node) {
  return &collected_[node];
}

void CompiledGraphRun::begin(const std::vector<at::Tensor>& inputs) {
  saved_.clear();
  saved_host_.clear();
  collected_.clear();
  if (mutated_inputs_.empty() || !isa_mode()) return;
  for (int i : mutated_inputs_) {
    const at::Tensor& t = inputs.at(static_cast<size_t>(i));
    if (t.defined() && t.device().is_privateuseone()) saved_.emplace_back(t, cpu_view(t).clone());
    // A CPU scalar the graph updates (an optimizer's step count): the host run updates it
    // before the launch stages it, and the programs update it again from what they read.
    if (t.defined() && !t.device().is_privateuseone() && t.numel() == 1)
      saved_host_.emplace_back(t.unsafeGetTensorImpl(), t.clone());
  }
}

bool CompiledGraphRun::written_here(int segment, int value) const {
  const int r = cg_.partition.stored_by[static_cast<size_t>(value)];
  if (r < 0) return false;
  const auto& region = cg_.partition.regions[static_cast<size_t>(r)];
  return region.segment == segment && kernels::compiler::emits_program(region.kind);
}

void CompiledGraphRun::launch(int segment, const std::vector<at::Tensor>& tensors) {
  sim::HostStageScope dispatch_stage(stages::kDispatch);
  auto& seg = cg_.segments.at(static_cast<size_t>(segment));
  const auto& g = cg_.lowered.graph;
  TORCH_CHECK(tensors.size() == seg.values.size(), "neuronsim: compiled graph ", cg_.name,
              " segment ", segment, " takes ", seg.values.size(), " tensors, got ", tensors.size());
  std::vector<uint64_t> address(g.values().size(), kernels::compiler::kNoAddress);
  std::optional<c10::Device> device;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.device().is_privateuseone()) {
      device = t.device();
      break;
    }
  }
  if (!device) device = c10::Device(c10::DeviceType::PrivateUse1, current_device());
  // One-element CPU tensors the programs read (an optimizer's step count) travel with the
  // launch, like kernel arguments: staged into device memory here.
  std::vector<at::Tensor> staged;
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor t = tensors[i];
    const auto& value = g.value(seg.values[i]);
    if (t.defined() && !t.device().is_privateuseone() && value.meta.host_scalar()) {
      at::Tensor d = at::empty_strided(t.sizes(), t.strides(), t.options().device(*device));
      const at::Tensor* before = nullptr;  // its value before this run's host updates
      for (const auto& [impl, v] : saved_host_) {
        if (impl == t.unsafeGetTensorImpl()) before = &v;
      }
      cpu_view(d).copy_(before ? *before : t);
      staged.push_back(d);
      t = d;
    }
    TORCH_CHECK(t.defined() && t.device().is_privateuseone(), "neuronsim: compiled graph ",
                cg_.name, ": ", value.name, " is not a neuron tensor");
    TORCH_CHECK(t.device() == *device, "neuronsim: compiled graph ", cg_.name,
                " mixes NeuronCores (", *device, " and ", t.device(), ")");
    // Programs were built for the traced layouts; a tensor laid out otherwise (a kernel whose
    // strides differ from its meta function) would be read wrongly.
    const auto& m = value.meta;
    bool same = t.sizes().vec() == m.sizes;
    for (size_t d = 0; same && d < m.sizes.size(); ++d) {
      same = m.sizes[d] <= 1 || t.stride(static_cast<int64_t>(d)) == m.strides[d];
    }
    TORCH_CHECK(same, "neuronsim: compiled graph ", cg_.name, ": ", value.name, " has sizes ",
                t.sizes(), " strides ", t.strides(), " but was compiled for sizes ",
                fmt::format("{}", fmt::join(m.sizes, ", ")), " strides ",
                fmt::format("{}", fmt::join(m.strides, ", ")));
    address[static_cast<size_t>(seg.values[i])] =
        with_runtime([&](runtime::Runtime& r) { return r.hbm_address(t.data_ptr()); });
  }

  kernels::compiler::LinkedProgram spliced;
  kernels::compiler::LinkedProgram* program = &seg.linked;
  if (!seg.prelinked) {
    // The eager nodes' programs, built while they ran, take their placeholders' places.
    std::vector<Part> parts;
    for (size_t k = 0; k < seg.parts.size(); ++k) {
      const int node = seg.eager_node[k];
      if (node < 0) {
        parts.push_back(seg.parts[k]);
        continue;
      }
      for (device_model::Program& p : collected_[node]) {
        Part part;
        part.name = seg.parts[k].name;
        part.detail = seg.parts[k].detail;
        part.barrier = true;
        part.program = std::move(p);
        parts.push_back(std::move(part));
      }
      collected_.erase(node);
    }
    spliced = with_runtime([&](runtime::Runtime& r) {
      return kernels::compiler::link(cg_.name, std::move(parts), cg_.lowered.root,
                                     r.device().params().core);
    });
    program = &spliced;
  }
  {
    sim::HostStageScope stage(stages::kBuild);  // relocation: the program's addresses
    kernels::compiler::relocate(*program, address);
  }
  const std::string scope_name =
      cg_.segments.size() == 1 ? cg_.name : fmt::format("{} (segment {})", cg_.name, segment);
  program->program.name = scope_name;
  OpScope scope(scope_name, {});
  const bool functional = isa_mode();
  // NEURONSIM_COMPILE_VERIFY=1 (ISA mode): compare what the fused programs wrote with the host's
  // values of the same run, value by value, and report the first that differ.
  static const bool verify = std::getenv("NEURONSIM_COMPILE_VERIFY") != nullptr;
  std::vector<std::pair<size_t, at::Tensor>> host_values;
  if (functional) {
    if (verify) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].device().is_privateuseone() &&
            at::isFloatingType(tensors[i].scalar_type())) {
          host_values.emplace_back(i, cpu_view(tensors[i]).clone());
        }
      }
    }
    // The programs compute every value: restore the inputs the host run already wrote, and
    // poison what the fused regions write so a value they missed cannot pass for theirs.
    for (auto& [dev, saved] : saved_) cpu_view(dev).copy_(saved);
    saved_.clear();
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!written_here(segment, seg.values[i])) continue;
      const at::Tensor& t = tensors[i];
      if (at::isFloatingType(t.scalar_type()) &&
          cg_.lowered.root[static_cast<size_t>(seg.values[i])] == seg.values[i]) {
        cpu_view(t).fill_(std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
  with_runtime([&](runtime::Runtime& r) {
    const uint32_t dev = static_cast<uint32_t>(device->index());
    const int64_t stream = current_stream(device->index()).id();
    const sim::SimTime h0 = r.charge_launch_overhead();
    const bool validated = seg.prelinked && validated_[static_cast<size_t>(segment)];
    device_model::RunResult res;
    {
      sim::HostStageScope stage(stages::kLaunch);
      res = r.launch(dev, stream, program->program, functional, validated);
    }
    if (seg.prelinked) validated_[static_cast<size_t>(segment)] = true;
    sim::HostStageScope stage(stages::kTrace);
    if (runtime::TraceSession* trace = runtime::TraceSession::active()) {
      trace->host("launch " + scope_name, "launch", h0, r.host_time());
      for (const auto& c : res.cores) trace->kernel(c.core, c.start, c.end);
    }
    ActivityRecorder::get().on_launch(scope_name, res);
    return 0;
  });
  for (const auto& [i, want] : host_values) {
    const at::Tensor got = cpu_view(tensors[i]).to(at::kFloat);
    const at::Tensor ref = want.to(at::kFloat);
    const double diff = (got - ref).abs().nan_to_num(1e30).max().item<double>();
    const double scale = ref.abs().max().item<double>() + 1e-6;
    if (diff > 1e-3 * scale) {
      std::fprintf(
          stderr,
          "neuronsim verify: seg %d %s %s (region %d) differs from the host by %g (max |x| %g)\n",
          segment, cg_.name.c_str(), g.value(seg.values[i]).name.c_str(),
          cg_.partition.stored_by[static_cast<size_t>(seg.values[i])], diff, scale);
    }
  }
}

}  // namespace neuronsim::backend
