#pragma once
// A bound on a program's time from the device's cost model, without simulating it: each
// compute engine's occupancy (the instruction cost model's cycles at the engine's clock, the
// TensorE stationary loads tracked as the engine does), each DMA queue's transfers (descriptor
// processing plus bytes at the engines the transfer spreads over, plus a launch latency for
// each transfer that waits for another engine) and the DMA engines' shared bandwidth. A program
// runs about as long as its busiest resource is busy; the compiler compares alternatives for a
// region with it.
#include <map>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels::compiler {

struct ProgramBound {
  double seconds = 0;                  // the busiest resource's time
  std::string resource;                // which ("vector", "dma3", "dma engines")
  std::map<std::string, double> busy;  // seconds per resource
};

ProgramBound program_bound(const device_model::Program& p, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::compiler
