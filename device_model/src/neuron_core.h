#pragma once
// One NeuronCore: the top module that builds and wires its engines, DMA queues and semaphores
// from CoreParams. No engine holds a pointer to another; they meet through the CoreContext.
#include <memory>
#include <vector>

#include <systemc>

#include "compute_engine.h"
#include "core_context.h"
#include "dma_queue.h"

namespace neuronsim::device_model {

class NeuronCore : public sc_core::sc_module {
 public:
  NeuronCore(sc_core::sc_module_name name, uint32_t index, const ChipParams& chip,
             const ExecMode& mode, HbmStorage& hbm, DmaFabric& fabric, sim::StatsRegistry& stats);

  CoreContext& context() { return ctx_; }
  /// Starts program instance `pcore` of a (validated) program; it must stay alive until the run
  /// ends. `grid_sems`: the semaphores of the launch's instances by pcore (Note [LNC launch]).
  void launch(const Program& program, uint32_t pcore, std::vector<SemaphoreBank*> grid_sems);
  bool busy() const;
  std::vector<std::string> blocked_reasons() const;
  /// After a deadlock or error: make every engine drop its stream.
  void unwind();
  sim::SimTime finish_time() const;
  uint64_t executed() const;
  void attach_trace(sim::TraceSink* sink);

 private:
  CoreContext ctx_;
  OnChipMemory sbuf_, psum_;
  SemaphoreBank sems_;
  std::vector<std::unique_ptr<StreamEngine>> engines_;  // 4 compute engines, then DMA queues
};

}  // namespace neuronsim::device_model
