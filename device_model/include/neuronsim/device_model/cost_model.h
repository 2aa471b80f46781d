#pragma once
// Timing of each instruction, separate from its function (executor.h). A cost model turns an
// instruction into engine cycles; engines turn cycles into time with their clock domain.
// Every formula cites its rule in HARDWARE.md / the preset's sources.
#include <memory>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"

namespace neuronsim::device_model {

struct ComputeCost {
  double cycles = 0;          // engine occupancy (initiation interval)
  double latency_cycles = 0;  // further delay before a dependent instruction may read the result
  // TensorE: a LoadStationary that runs in the background (0 when the stationary is reused).
  double load_stationary_cycles = 0;
  // Work done, for reports.
  double flops = 0;
};

/// What TensorE holds when an instruction issues (the engine tracks it).
struct StationaryState {
  bool load = false;   // the stationary operand must be loaded: a new fold
  bool first = false;  // ... the first one since the program started
};

/// One per compute engine kind.
class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  virtual ComputeCost cost(const Instruction& inst, StationaryState stationary) const = 0;
};

std::unique_ptr<ComputeCostModel> make_cost_model(EngineKind engine, const CoreParams& core);

/// Static description of one DMA transfer: how it spreads over the DMA engines.
struct DmaTransferShape {
  double bytes = 0;               // bytes moved through the DMA engines
  double hbm_bytes = 0;           // bytes read from plus written to HBM
  uint32_t engines = 1;           // DMA engines that share the transfer
  uint64_t descriptors = 1;       // contiguous chunks (one descriptor each)
  uint64_t packets = 1;           // descriptors cut into dma.packet_bytes pieces
  double cap_bytes_per_s = 0;     // engines x per-engine bandwidth
  double descriptor_time_ns = 0;  // packet processing on the busiest engine
  bool transpose = false;         // moved by a DMA transpose (element-granular, into SBUF)
  bool touches_hbm() const { return hbm_bytes > 0; }
};

DmaTransferShape dma_transfer_shape(const Instruction& dma_copy, const DmaParams& dma);

}  // namespace neuronsim::device_model
