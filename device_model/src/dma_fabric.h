#pragma once
// Bandwidth sharing between concurrent DMA transfers, as a fluid model: each active transfer gets
// a max-min fair share of (a) its own engines' bandwidth, (b) its core's DMA engine pool and
// (c) the HBM stack it touches. Shares are recomputed whenever a transfer starts or ends, which
// approximates the hardware's round-robin arbitration at 4 KiB packet boundaries.
#include <vector>

#include <systemc>

#include "neuronsim/sim/trace_sink.h"

namespace neuronsim::device_model {

class DmaFabric : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DmaFabric);
  DmaFabric(sc_core::sc_module_name name, uint32_t cores, double core_pool_bytes_per_s,
            uint32_t stacks, double stack_bytes_per_s);

  struct Transfer {
    double bytes = 0;            // through the DMA engines
    double hbm_bytes = 0;        // on the HBM stack (0 if none)
    double cap_bytes_per_s = 0;  // the transfer's own engines
    uint32_t core = 0;
    uint32_t stack = 0;
  };
  /// Blocks the calling SystemC thread until the transfer's bytes have moved.
  void transfer(const Transfer& t);

  /// Counter tracks for HBM bandwidth, one per stack (created when a sink is attached).
  void attach_trace(sim::TraceSink* sink);

 private:
  struct Flow {
    Transfer t;
    double remaining = 0;
    double rate = 0;
    sc_core::sc_event done;
    bool finished = false;
  };
  void advance();
  void reallocate();
  void schedule();
  void on_tick();
  void emit_counters();

  std::vector<Flow*> flows_;
  double core_pool_bw_;
  double stack_bw_;
  uint32_t cores_, stacks_;
  uint64_t last_ps_ = 0;
  sc_core::sc_event tick_;
  sim::TraceSink* sink_ = nullptr;
  std::vector<sim::TrackId> hbm_tracks_;
  std::vector<double> last_emitted_;
  std::vector<double> used_;  // emit_counters()'s per-stack sums (kept: no allocation per call)
};

}  // namespace neuronsim::device_model
