#include "dma_queue.h"

#include <algorithm>

#include <fmt/format.h>

#include "neuronsim/device_model/executor.h"
#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {

DmaQueue::DmaQueue(sc_core::sc_module_name name, CoreContext& ctx, uint8_t queue)
    : StreamEngine(name, ctx, StreamId{EngineKind::kDma, queue}) {
  const std::string p = fmt::format("nc{}.{}.", ctx.index, id_.name());
  transfers_ = &ctx.stats->counter(p + "transfers", "count", "DMA transfers");
  bytes_ = &ctx.stats->counter(p + "bytes", "byte", "bytes moved");
  hbm_bytes_ = &ctx.stats->counter(p + "hbm_bytes", "byte", "bytes read from or written to HBM");
  busy_ps_ = &ctx.stats->counter(p + "busy_ps", "ps", "time the queue was transferring");
}

void DmaQueue::on_issue_point(sim::SimTime ready, bool first) {
  issue_ready_ = first ? ready : sim::max(issue_ready_, ready);
}

void DmaQueue::run_instruction(const Instruction& in, size_t index) {
  const DmaParams& dma = ctx_.core->dma;
  const DmaTransferShape shape = dma_transfer_shape(in, dma);
  const bool timing = ctx_.timing();
  sim::SimTime start = sim::Simulation::now();
  if (timing) {
    // DMA-BW's ~1300 ns per transfer was measured on HBM transfers, so it already holds the HBM
    // access latency; only an HBM latency beyond it (a what-if) lengthens the launch.
    double latency_ns = dma.launch_latency_ns;
    if (shape.touches_hbm()) latency_ns = std::max(latency_ns, ctx_.chip->hbm.latency_ns);
    start = sim::max(start, issue_ready_ + sim::SimTime::from_ns(latency_ns));
    // Launch latency, then descriptor processing: one wait for both.
    wait_until(start + sim::SimTime::from_ns(shape.descriptor_time_ns));
    const uint64_t hbm_addr = in.src0.space == MemSpace::kHbm ? in.src0.offset : in.dst.offset;
    const uint32_t stack = shape.touches_hbm()
                               ? static_cast<uint32_t>(hbm_addr / ctx_.chip->hbm.capacity_bytes)
                               : ctx_.hbm_stack;
    ctx_.fabric->transfer({shape.bytes, shape.hbm_bytes, shape.cap_bytes_per_s, ctx_.index, stack});
  }
  if (ctx_.functional()) execute(in, ctx_.mem);
  const sim::SimTime end = sim::Simulation::now();
  last_ready_ = end;

  transfers_->add(1);
  bytes_->add(static_cast<uint64_t>(shape.bytes));
  hbm_bytes_->add(static_cast<uint64_t>(shape.hbm_bytes));
  busy_ps_->add((end - start).ps);
  ctx_.dma_busy.add(start, end);
  if (ctx_.tracing()) {
    sim::TraceArgs args{{"bytes", shape.bytes},     {"hbm_bytes", shape.hbm_bytes},
                        {"engines", shape.engines}, {"descriptors", shape.descriptors},
                        {"packets", shape.packets}, {"index", index}};
    args.add_deferred<AccessPattern, &AccessPattern::append_text>("src", in.src0);
    args.add_deferred<AccessPattern, &AccessPattern::append_text>("dst", in.dst);
    trace_slice(track_, display_name_, "dma_copy", start, end, std::move(args));
  }
}

sim::SimTime DmaQueue::drain() {
  return sim::Simulation::now();
}

}  // namespace neuronsim::device_model
