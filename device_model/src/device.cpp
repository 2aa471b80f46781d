#include "neuronsim/device_model/device.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <systemc>

#include "dma_fabric.h"
#include "neuron_core.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/validator.h"
#include "neuronsim/sim/host_profile.h"
#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {

// Validating a program before it runs (sim/host_profile.h).
const sim::HostStage kValidateStage{"validate"};

std::string_view exec_mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::kFull:
      return "full";
    case ExecMode::kTiming:
      return "timing";
    case ExecMode::kFunctional:
      return "functional";
  }
  return "?";
}

std::optional<ExecMode> parse_exec_mode(std::string_view n) {
  for (ExecMode m : {ExecMode::kFull, ExecMode::kTiming, ExecMode::kFunctional}) {
    if (exec_mode_name(m) == n) return m;
  }
  return std::nullopt;
}

std::string core_trace_process(uint32_t core, uint32_t lnc) {
  return fmt::format("nc{}", lnc > 1 ? core - core % lnc : core);
}

std::string core_trace_row_prefix(uint32_t core, uint32_t lnc) {
  return lnc > 1 && core % lnc != 0 ? fmt::format("pcore{} ", core % lnc) : std::string();
}

struct Device::Impl {
  Config config;
  ChipParams params;
  ExecMode mode;
  uint32_t cores;
  std::unique_ptr<HbmStorage> hbm;
  std::unique_ptr<DmaFabric> fabric;
  std::vector<std::unique_ptr<NeuronCore>> core;
  sim::StatsRegistry stats;
  sim::TraceSink* sink = &sim::null_trace_sink();
  std::vector<std::optional<Program>> pending;  // copies made by submit()
  // The program each core runs next: its copy in `pending`, or the caller's program during
  // run(core, program), which needs no copy (a large program is megabytes of instructions).
  std::vector<const Program*> queued;
  // Per core: the program instance it runs of its queued program (Note [LNC launch]; 0 for a
  // grid-1 program), and the first core of that launch.
  std::vector<uint32_t> queued_pcore, queued_head;
  std::vector<sim::TrackId> kernel_tracks;  // id + 1, 0 = not created
  std::vector<sim::TrackId> host_tracks;    // id + 1, 0 = not created
  std::function<bool(uint64_t, uint64_t)> hbm_range_check;

  Impl(const Config& c, DeviceOptions o) : config(c), params(parse_chip_params(c)), mode(o.mode) {}
  /// Validates `program` and queues it for `core`, as a copy or borrowed.
  void enqueue(uint32_t core, const Program& program, bool copy, bool validated = false);
  /// The "Kernels" row of a physical core (created on first use).
  sim::TrackId kernel_track(uint32_t core);
  /// Forgets what is queued on the cores of the launch that `core` heads.
  void unqueue(uint32_t core);
};

sim::TrackId Device::Impl::kernel_track(uint32_t c) {
  if (kernel_tracks[c] == 0) {
    const uint32_t lnc = params.logical_core_size;
    const int sort = lnc > 1 ? 1000 * static_cast<int>(c % lnc) : 0;
    // A logical core's launches, grid launches included, are on its first core's row, "Kernels".
    const std::string row = core_trace_row_prefix(c, lnc) + "Kernels";
    kernel_tracks[c] =
        sink->add_track({core_trace_process(c, lnc), row, sim::TrackKind::kSlices, sort}) + 1;
  }
  return kernel_tracks[c] - 1;
}

void Device::Impl::unqueue(uint32_t core) {
  const Program* p = queued[core];
  if (!p) return;
  for (uint32_t i = 0; i < p->grid && core + i < cores; ++i) {
    queued[core + i] = nullptr;
    queued_pcore[core + i] = 0;
    queued_head[core + i] = core + i;
  }
  pending[core].reset();
}

namespace {
bool g_device_built = false;
}

Device::Device(const Config& config, DeviceOptions options)
    : impl_(std::make_unique<Impl>(config, options)) {
  if (g_device_built) {
    throw Error(
        "a neuronsim Device already exists in this process: SystemC elaborates once per "
        "process, so each configuration needs its own process");
  }
  sim::Simulation::prepare();
  Impl& d = *impl_;
  const ChipParams& p = d.params;
  d.cores = options.cores ? options.cores : p.cores_per_chip * p.chips;
  if (d.cores > p.cores_per_chip * p.chips) {
    throw ConfigError(fmt::format("{} NeuronCores requested but the {} preset's instance has {}",
                                  d.cores, p.preset_name, p.cores_per_chip * p.chips));
  }
  const uint32_t stacks = (d.cores + p.cores_per_stack() - 1) / p.cores_per_stack();
  d.hbm = std::make_unique<HbmStorage>(p.hbm.capacity_bytes, stacks);
  d.fabric = std::make_unique<DmaFabric>(
      "fabric", d.cores, p.core.dma.engines * p.core.dma.engine_bandwidth_bytes_per_s, stacks,
      p.hbm.bandwidth_bytes_per_s);
  for (uint32_t c = 0; c < d.cores; ++c) {
    d.core.push_back(std::make_unique<NeuronCore>(fmt::format("nc{}", c).c_str(), c, p, d.mode,
                                                  *d.hbm, *d.fabric, d.stats));
  }
  d.pending.resize(d.cores);
  d.queued.assign(d.cores, nullptr);
  d.queued_pcore.assign(d.cores, 0);
  for (uint32_t c = 0; c < d.cores; ++c) d.queued_head.push_back(c);
  d.kernel_tracks.assign(d.cores, 0);
  g_device_built = true;
  // Finish elaboration so that later runs start from a ready kernel.
  sim::Simulation::run_for(sim::SimTime{});
}

Device::~Device() = default;

const ChipParams& Device::params() const {
  return impl_->params;
}
const Config& Device::config() const {
  return impl_->config;
}
uint32_t Device::num_cores() const {
  return impl_->cores;
}
ExecMode Device::mode() const {
  return impl_->mode;
}
void Device::set_mode(ExecMode mode) {
  impl_->mode = mode;
}
sim::StatsRegistry& Device::stats() {
  return impl_->stats;
}
sim::TraceSink& Device::trace_sink() {
  return *impl_->sink;
}
uint8_t* Device::hbm_data() {
  return impl_->hbm->data();
}
uint64_t Device::hbm_capacity() const {
  return impl_->hbm->capacity();
}
uint64_t Device::hbm_base_of_core(uint32_t core) const {
  return static_cast<uint64_t>(core / impl_->params.cores_per_stack()) *
         impl_->params.hbm.capacity_bytes;
}
void Device::set_hbm_range_check(std::function<bool(uint64_t, uint64_t)> fn) {
  impl_->hbm_range_check = std::move(fn);
}

void Device::set_trace_sink(sim::TraceSink* sink) {
  Impl& d = *impl_;
  d.sink = sink ? sink : &sim::null_trace_sink();
  d.kernel_tracks.assign(d.cores, 0);
  d.host_tracks.assign(d.cores, 0);
  d.fabric->attach_trace(d.sink);
  for (auto& c : d.core) c->attach_trace(d.sink);
  if (!d.sink->enabled()) return;
  const ChipParams& p = d.params;
  d.sink->metadata("preset", p.preset_name);
  d.sink->metadata("config", d.config.flat_values());
  d.sink->metadata("overrides", d.config.overrides());
  d.sink->metadata("mode", std::string(exec_mode_name(d.mode)));
  d.sink->metadata("cores", d.cores);
  d.sink->metadata("peaks", {{"tensor_flops_per_core", p.tensor_peak_flops()},
                             {"hbm_bytes_per_s_per_stack", p.hbm.bandwidth_bytes_per_s},
                             {"hbm_stacks", d.hbm->stacks()},
                             {"dma_bytes_per_s_per_core",
                              p.core.dma.engines * p.core.dma.engine_bandwidth_bytes_per_s}});
  // Every logical core's "Kernels" row first; a later physical core's when it runs a program of
  // its own.
  for (uint32_t c = 0; c < d.cores; c += p.logical_core_size) d.kernel_track(c);
}

void Device::submit(uint32_t core, const Program& program) {
  impl_->enqueue(core, program, true);
}

void Device::Impl::enqueue(uint32_t core, const Program& program, bool copy, bool validated) {
  Impl& d = *this;
  if (core >= d.cores) {
    throw Error(fmt::format("NeuronCore {} does not exist; the device has {}", core, d.cores));
  }
  const uint32_t lnc = d.params.logical_core_size;
  const uint32_t grid = program.grid;
  if (grid > 1 && grid <= lnc) {  // larger grids fail validation ("grid") below
    if (core % lnc != 0) {
      throw Error(fmt::format(
          "program '{}' has grid {}: it launches on a logical NeuronCore, whose first physical "
          "core is a multiple of {}, not on physical core {}",
          program.name, grid, lnc, core));
    }
    if (core + grid > d.cores) {
      throw Error(
          fmt::format("program '{}' has grid {} but only {} of the logical core's physical "
                      "cores are elaborated (DeviceOptions::cores = {})",
                      program.name, grid, d.cores - core, d.cores));
    }
  }
  for (uint32_t i = 0; i < std::min(grid, d.cores - core); ++i) {
    if (d.queued[core + i]) {
      throw Error(fmt::format("NeuronCore {} already has a program queued for this run", core + i));
    }
  }
  auto queue = [&](const Program* p) {
    for (uint32_t i = 0; i < p->grid; ++i) {
      d.queued[core + i] = p;
      d.queued_pcore[core + i] = i;
      d.queued_head[core + i] = core;
    }
  };
  if (validated) {
    queue(&program);
    return;
  }
  ValidationContext vc;
  vc.core = &d.params.core;
  vc.hbm_capacity = d.hbm->capacity();
  vc.logical_core_size = lnc;
  if (d.hbm_range_check) {
    vc.hbm_range_valid = d.hbm_range_check;
  } else if (!program.hbm_regions.empty()) {
    vc.hbm_range_valid = [&program](uint64_t a, uint64_t n) {
      return std::any_of(
          program.hbm_regions.begin(), program.hbm_regions.end(),
          [&](const HbmRegion& r) { return a >= r.offset && a + n <= r.offset + r.bytes; });
    };
  }
  {
    sim::HostStageScope stage(kValidateStage);
    validate(program, vc);
  }
  if (copy) {
    d.pending[core] = program;
    queue(&*d.pending[core]);
  } else {
    queue(&program);
  }
}

RunResult Device::run() {
  Impl& d = *impl_;
  RunResult result;
  result.start = now();
  std::vector<uint32_t> launched;
  for (uint32_t c = 0; c < d.cores; ++c) {
    if (!d.queued[c]) continue;
    const uint32_t head = d.queued_head[c];
    std::vector<SemaphoreBank*> grid_sems;
    for (uint32_t i = 0; i < d.queued[c]->grid; ++i) {
      grid_sems.push_back(d.core[head + i]->context().sems);
    }
    d.core[c]->launch(*d.queued[c], d.queued_pcore[c], std::move(grid_sems));
    launched.push_back(c);
  }
  sim::Simulation::run_until_idle();
  // Every transfer has ended: the DMA queues' union is settled.
  for (uint32_t c : launched) d.core[c]->context().dma_busy.fold();

  std::string deadlock;
  std::exception_ptr error;
  for (uint32_t c : launched) {
    NeuronCore& core = *d.core[c];
    if (core.context().error && !error) error = core.context().error;
    if (core.busy()) {
      for (const auto& r : core.blocked_reasons()) deadlock += fmt::format("\n  nc{}: {}", c, r);
    }
  }
  if (!deadlock.empty() || error) {
    for (uint32_t c : launched) d.core[c]->unwind();
    sim::Simulation::run_until_idle();
    for (uint32_t c : launched) d.core[c]->context().dma_busy.fold();
    // Instructions the aborted program issued still complete: its time is not the next run's.
    sim::SimTime aborted_end = now();
    for (uint32_t c : launched) aborted_end = sim::max(aborted_end, d.core[c]->finish_time());
    if (aborted_end > now()) advance(aborted_end - now());
    for (uint32_t c : launched) {
      if (d.queued[c] && d.queued_head[c] == c) d.unqueue(c);
    }
    if (error) std::rethrow_exception(error);
    throw DeadlockError("deadlock: engines are blocked on semaphores that nothing will signal:" +
                        deadlock);
  }
  sim::SimTime end = now();
  for (uint32_t c : launched) end = sim::max(end, d.core[c]->finish_time());
  if (end > now()) advance(end - now());
  for (uint32_t c : launched) {
    // A later instance of a grid launch: reported with its first core (and unqueued with it).
    if (!d.queued[c] || d.queued_head[c] != c) continue;
    NeuronCore& core = *d.core[c];
    const Program& program = *d.queued[c];
    CoreRunResult r;
    r.core = c;
    r.program = program.name;
    r.start = result.start;
    r.end = core.finish_time();
    r.instructions = program.instruction_count();
    r.grid = program.grid;
    // A grid launch ends when its last instance ends; its sections when they end on every core.
    std::vector<sim::SimTime> ends = core.context().section_end;
    if (program.grid > 1) {
      for (uint32_t i = 0; i < program.grid; ++i) {
        NeuronCore& pc = *d.core[c + i];
        r.instance_end.push_back(sim::max(pc.finish_time(), r.start));
        r.end = sim::max(r.end, pc.finish_time());
        const auto& e = pc.context().section_end;
        for (size_t s = 0; s < ends.size() && s < e.size(); ++s) ends[s] = sim::max(ends[s], e[s]);
      }
    }
    r.end = sim::max(r.end, r.start);
    if (d.sink->enabled()) {
      sim::TraceArgs args{{"instructions", program.instruction_count()}};
      if (program.grid > 1) {  // per-instance keys: JSON members (rare)
        nlohmann::json grid = {{"grid", program.grid}};
        for (uint32_t i = 0; i < program.grid; ++i) {
          grid[fmt::format("pcore{}_instructions", i)] = program.instruction_count(i);
          grid[fmt::format("pcore{}_end_ns", i)] = r.instance_end[i].ns();
        }
        args = sim::TraceArgs(std::move(grid)).add({"instructions", program.instruction_count()});
      }
      d.sink->slice(d.kernel_track(c), r.program, "kernel", r.start, r.end, args);
      // Sections as consecutive slices inside the program's: each runs from the previous one's
      // end to its own (work a section started early, such as prefetching DMA, shows under the
      // section it overlapped), so they nest cleanly on the same row.
      std::vector<uint64_t> counts(program.sections.size(), 0);
      for (const Stream& st : program.streams) {
        for (size_t m = 0; m < st.section_marks.size(); ++m) {
          const size_t last = m + 1 < st.section_marks.size() ? st.section_marks[m + 1].first
                                                              : st.instructions.size();
          const uint32_t sec = st.section_marks[m].second;
          if (sec < counts.size()) counts[sec] += last - st.section_marks[m].first;
        }
      }
      sim::SimTime prev = r.start;
      for (size_t s = 0; s < program.sections.size() && s < ends.size(); ++s) {
        const sim::SimTime end = sim::max(prev, sim::min(ends[s], r.end));
        d.sink->slice(d.kernel_track(c), program.sections[s].name, "section", prev, end,
                      {{"nodes", program.sections[s].detail},
                       {"program", r.program},
                       {"instructions", counts[s]}});
        prev = end;
      }
    }
    result.cores.push_back(r);
    d.unqueue(c);
  }
  result.end = now();
  return result;
}

RunResult Device::run(uint32_t core, const Program& program, bool validated) {
  impl_->enqueue(core, program, false, validated);
  // `program` is only borrowed for this call: never leave it queued.
  struct Unqueue {
    Impl& d;
    uint32_t core;
    const Program* program;
    ~Unqueue() {
      if (d.queued[core] == program) d.unqueue(core);
    }
  } unqueue{*impl_, core, &program};
  return run();
}

Device::HostCopy Device::host_copy(uint32_t core, uint64_t bytes, bool to_device,
                                   uint64_t hbm_address) {
  Impl& d = *impl_;
  if (core >= d.cores) {
    throw Error(fmt::format("NeuronCore {} does not exist; the device has {}", core, d.cores));
  }
  HostCopy r{now(), now()};
  if (d.mode == ExecMode::kFunctional || bytes == 0) return r;
  const ChipParams& p = d.params;
  const uint32_t stack = std::min<uint32_t>(d.hbm->stack_of(hbm_address), d.hbm->stacks() - 1);
  DmaFabric::Transfer t{static_cast<double>(bytes), static_cast<double>(bytes),
                        p.host.bandwidth_bytes_per_s, core, stack};
  DmaFabric* fabric = d.fabric.get();
  sim::SimTime* end = &r.end;
  const sim::SimTime latency = sim::SimTime::from_ns(p.host.latency_ns);
  sc_core::sc_spawn([fabric, t, end, latency] {
    sc_core::wait(sc_core::sc_time::from_value(latency.ps));
    fabric->transfer(t);
    *end = sim::Simulation::now();
  });
  sim::Simulation::run_until_idle();
  if (d.sink->enabled()) {
    if (d.host_tracks.empty()) d.host_tracks.assign(d.cores, 0);
    if (d.host_tracks[core] == 0) {
      const uint32_t lnc = p.logical_core_size;
      d.host_tracks[core] = d.sink->add_track({core_trace_process(core, lnc),
                                               core_trace_row_prefix(core, lnc) + "Host DMA",
                                               sim::TrackKind::kSlices, 90}) +
                            1;
    }
    d.sink->slice(d.host_tracks[core] - 1, to_device ? "host_to_device" : "device_to_host",
                  "host_dma", r.start, r.end, {{"bytes", bytes}, {"hbm_bytes", bytes}});
  }
  return r;
}

void Device::advance(sim::SimTime delta) {
  if (delta.ps > 0) sim::Simulation::run_for(delta);
}

sim::SimTime Device::now() const {
  return sim::Simulation::now();
}

}  // namespace neuronsim::device_model
