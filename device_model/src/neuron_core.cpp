#include "neuron_core.h"

#include <fmt/format.h>

#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {

NeuronCore::NeuronCore(sc_core::sc_module_name name, uint32_t index, const ChipParams& chip,
                       const ExecMode& mode, HbmStorage& hbm, DmaFabric& fabric,
                       sim::StatsRegistry& stats)
    : sc_module(name),
      sbuf_(chip.core.sbuf.partitions, chip.core.sbuf.partition_bytes),
      psum_(chip.core.psum.partitions, chip.core.psum.partition_bytes),
      sems_("semaphores", chip.core.semaphores) {
  ctx_.index = index;
  ctx_.logical_core_size = chip.logical_core_size;
  ctx_.chip = &chip;
  ctx_.core = &chip.core;
  ctx_.mode = &mode;
  ctx_.mem = MemoryMap{&sbuf_, &psum_, &hbm};
  ctx_.sems = &sems_;
  ctx_.fabric = &fabric;
  ctx_.hbm_stack = index / chip.cores_per_stack();
  ctx_.stats = &stats;
  ctx_.sink = &sim::null_trace_sink();
  ctx_.sbuf_occupancy = OccupancyTracker(chip.core.sbuf.partitions);
  ctx_.psum_occupancy = OccupancyTracker(chip.core.psum.partitions);
  for (const EngineInfo& e : kEngines) {
    if (e.compute) {
      engines_.push_back(
          std::make_unique<ComputeEngine>(std::string(e.stream).c_str(), ctx_, e.kind));
    }
  }
  // The queues together (a transfer of one overlapping another's counts once).
  ctx_.dma_busy.attach(&stats.counter(
      fmt::format("nc{}.{}.busy_ps", index, engine_info(EngineKind::kDma).stream), "ps",
      "time at least one DMA queue was transferring (counted at a run's end)"));
  for (uint32_t q = 0; q < chip.core.dma.queues; ++q) {
    engines_.push_back(std::make_unique<DmaQueue>(
        StreamId{EngineKind::kDma, static_cast<uint8_t>(q)}.name().c_str(), ctx_,
        static_cast<uint8_t>(q)));
  }
}

void NeuronCore::attach_trace(sim::TraceSink* sink) {
  ctx_.sink = sink ? sink : &sim::null_trace_sink();
  for (auto& e : engines_) e->reset_trace_tracks();
  if (!ctx_.tracing()) return;
  const std::string proc = ctx_.process_name();
  const std::string pre = ctx_.row_prefix();
  const int sort = 1000 * static_cast<int>(ctx_.index % ctx_.logical_core_size);
  ctx_.sbuf_track = ctx_.sink->add_track(
      {proc, pre + "SBUF occupancy (bytes)", sim::TrackKind::kCounter, 100 + sort});
  ctx_.psum_track = ctx_.sink->add_track(
      {proc, pre + "PSUM occupancy (bytes)", sim::TrackKind::kCounter, 101 + sort});
}

void NeuronCore::launch(const Program& program, uint32_t pcore,
                        std::vector<SemaphoreBank*> grid_sems) {
  ctx_.program_name = program.name;
  ctx_.sources = &program.sources;
  ctx_.grid_sems = std::move(grid_sems);
  ctx_.section_end.assign(program.sections.size(), sim::SimTime{});
  ctx_.abort = false;
  ctx_.error = nullptr;
  sems_.reset();
  ctx_.sbuf_occupancy.reset();
  ctx_.psum_occupancy.reset();
  if (ctx_.tracing()) {
    ctx_.sink->counter(ctx_.sbuf_track, sim::Simulation::now(), 0);
    ctx_.sink->counter(ctx_.psum_track, sim::Simulation::now(), 0);
  }
  for (auto& e : engines_) {
    const Stream* found = nullptr;
    for (const Stream& s : program.streams) {
      if (s.id.engine == e->id().engine && s.id.queue == e->id().queue && s.id.pcore == pcore) {
        found = &s;
      }
    }
    e->start(found);
  }
}

bool NeuronCore::busy() const {
  for (const auto& e : engines_) {
    if (e->busy()) return true;
  }
  return false;
}

std::vector<std::string> NeuronCore::blocked_reasons() const {
  std::vector<std::string> out;
  for (const auto& e : engines_) {
    if (e->busy()) out.push_back(e->blocked_reason());
  }
  return out;
}

void NeuronCore::unwind() {
  ctx_.abort = true;
  sems_.wake_all();
}

sim::SimTime NeuronCore::finish_time() const {
  sim::SimTime t;
  for (const auto& e : engines_) t = sim::max(t, e->finish_time());
  return t;
}

uint64_t NeuronCore::executed() const {
  uint64_t n = 0;
  for (const auto& e : engines_) n += e->executed();
  return n;
}

}  // namespace neuronsim::device_model
