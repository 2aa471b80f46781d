#include "neuronsim/device/device.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <systemc>

#include "dma_fabric.h"
#include "neuron_core.h"
#include "neuronsim/device/errors.h"
#include "neuronsim/device/validator.h"
#include "neuronsim/sim/host_profile.h"
#include "neuronsim/sim/simulation.h"

namespace neuronsim::device {

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
  std::vector<sim::TrackId> kernel_tracks;
  std::vector<sim::TrackId> host_tracks;  // id + 1, 0 = not created
  std::function<bool(uint64_t, uint64_t)> hbm_range_check;

  Impl(const Config& c, DeviceOptions o) : config(c), params(parse_chip_params(c)), mode(o.mode) {}
  /// Validates `program` and queues it for `core`, as a copy or borrowed.
  void enqueue(uint32_t core, const Program& program, bool copy, bool validated = false);
};

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
  for (uint32_t c = 0; c < d.cores; ++c) {
    d.kernel_tracks[c] =
        d.sink->add_track({fmt::format("nc{}", c), "Kernels", sim::TrackKind::kSlices, 0});
  }
}

void Device::submit(uint32_t core, const Program& program) {
  impl_->enqueue(core, program, true);
}

void Device::Impl::enqueue(uint32_t core, const Program& program, bool copy, bool validated) {
  Impl& d = *this;
  if (core >= d.cores) {
    throw Error(fmt::format("NeuronCore {} does not exist; the device has {}", core, d.cores));
  }
  if (d.queued[core]) {
    throw Error(fmt::format("NeuronCore {} already has a program queued for this run", core));
  }
  if (validated) {
    d.queued[core] = &program;
    return;
  }
  ValidationContext vc;
  vc.core = &d.params.core;
  vc.hbm_capacity = d.hbm->capacity();
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
    sim::HostStageScope stage(sim::HostStage::kValidate);
    validate(program, vc);
  }
  if (copy) {
    d.pending[core] = program;
    d.queued[core] = &*d.pending[core];
  } else {
    d.queued[core] = &program;
  }
}

RunResult Device::run() {
  Impl& d = *impl_;
  RunResult result;
  result.start = now();
  std::vector<uint32_t> launched;
  for (uint32_t c = 0; c < d.cores; ++c) {
    if (!d.queued[c]) continue;
    d.core[c]->launch(*d.queued[c]);
    launched.push_back(c);
  }
  sim::Simulation::run_until_idle();

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
    // Instructions the aborted program issued still complete: its time is not the next run's.
    sim::SimTime aborted_end = now();
    for (uint32_t c : launched) aborted_end = sim::max(aborted_end, d.core[c]->finish_time());
    if (aborted_end > now()) advance(aborted_end - now());
    for (uint32_t c : launched) d.queued[c] = nullptr, d.pending[c].reset();
    if (error) std::rethrow_exception(error);
    throw DeadlockError("deadlock: engines are blocked on semaphores that nothing will signal:" +
                        deadlock);
  }
  sim::SimTime end = now();
  for (uint32_t c : launched) end = sim::max(end, d.core[c]->finish_time());
  if (end > now()) advance(end - now());
  for (uint32_t c : launched) {
    NeuronCore& core = *d.core[c];
    const Program& program = *d.queued[c];
    CoreRunResult r{c, program.name, result.start, core.finish_time(), program.instruction_count()};
    r.end = sim::max(r.end, r.start);
    if (d.sink->enabled()) {
      d.sink->slice(d.kernel_tracks[c], r.program, "kernel", r.start, r.end,
                    {{"instructions", program.instruction_count()}});
      // Sections as consecutive slices inside the program's: each runs from the previous one's
      // end to its own (work a section started early, such as prefetching DMA, shows under the
      // section it overlapped), so they nest cleanly on the same row.
      const auto& ends = core.context().section_end;
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
        d.sink->slice(d.kernel_tracks[c], program.sections[s].name, "section", prev, end,
                      {{"nodes", program.sections[s].detail},
                       {"program", r.program},
                       {"instructions", counts[s]}});
        prev = end;
      }
    }
    result.cores.push_back(r);
    d.queued[c] = nullptr;
    d.pending[c].reset();
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
      if (d.queued[core] == program) d.queued[core] = nullptr;
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
      d.host_tracks[core] =
          d.sink->add_track({fmt::format("nc{}", core), "Host DMA", sim::TrackKind::kSlices, 90}) +
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

}  // namespace neuronsim::device
