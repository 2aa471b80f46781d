#pragma once
// One DMA queue of a core. Transfers run in order: each waits for the queue's previous transfer,
// and for the launch latency (descriptor setup, semaphore-to-start, HBM access: DMA-BW ~1300 ns)
// counted from when it became ready to issue (the stream started, or the semaphore it waited for
// reached its value, even if that was before the queue got to the wait: the trigger would have
// been issued then), so a queue fed back-to-back hides that latency. The
// data phase is per-packet processing plus the bytes moved through the shared DmaFabric.
#include "neuronsim/device_model/cost_model.h"
#include "stream_engine.h"

namespace neuronsim::device_model {

class DmaQueue : public StreamEngine {
 public:
  DmaQueue(sc_core::sc_module_name name, CoreContext& ctx, uint8_t queue);
  void reset_trace_tracks() override { track_ = 0; }

 protected:
  void run_instruction(const Instruction& in, size_t index) override;
  sim::SimTime drain() override;
  void on_issue_point(sim::SimTime ready, bool first) override;

 private:
  sim::SimTime issue_ready_;  // last issue point: stream start or when a wait became satisfied
  sim::TrackId track_ = 0;
  sim::StatsRegistry::Counter *transfers_, *bytes_, *hbm_bytes_, *busy_ps_;
};

}  // namespace neuronsim::device_model
