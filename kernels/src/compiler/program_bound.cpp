#include "neuronsim/kernels/compiler/program_bound.h"

#include <map>

#include "neuronsim/device_model/cost_model.h"
#include "neuronsim/device_model/engines.h"

namespace neuronsim::kernels::compiler {

using namespace device_model;

namespace {

double frequency(const CoreParams& core, EngineKind k) {
  switch (k) {
    case EngineKind::kTensor:
      return core.tensor.frequency_hz;
    case EngineKind::kVector:
      return core.vector.frequency_hz;
    case EngineKind::kScalar:
      return core.scalar.frequency_hz;
    default:
      return core.gpsimd.frequency_hz;
  }
}

}  // namespace

ProgramBound program_bound(const Program& p, const CoreParams& core) {
  ProgramBound best;
  auto consider = [&](double s, const std::string& what) { best.busy[what] += s; };
  double dma_bytes = 0;
  std::map<EngineKind, std::unique_ptr<ComputeCostModel>> models;
  for (const Stream& st : p.streams) {
    const EngineKind k = st.id.engine;
    double busy = 0;
    if (k == EngineKind::kDma) {
      // A transfer issued after a semaphore wait (and the queue's first) starts a DMA launch
      // latency after it may issue (dma_queue.cpp): the wait is for another engine's work, so
      // the latency is not hidden behind the queue's previous transfer.
      bool waited = true;
      for (const Instruction& in : st.instructions) {
        if (in.op == Opcode::kSemWait) waited = true;
        if (in.is_sync()) continue;
        const DmaTransferShape s = dma_transfer_shape(in, core.dma);
        busy += s.descriptor_time_ns * 1e-9 + s.bytes / s.cap_bytes_per_s;
        if (waited) busy += core.dma.launch_latency_ns * 1e-9;
        waited = false;
        dma_bytes += s.bytes;
      }
      consider(busy, st.id.name());
      continue;
    }
    auto& model = models[k];
    if (!model) model = make_cost_model(k, core);
    // TensorE loads a stationary operand when it differs from the one it holds; a transpose
    // passes its data through the PE array and drops it (compute_engine.cpp).
    bool holds = false, loaded_any = false;
    AccessPattern stationary;
    double cycles = 0;
    for (const Instruction& in : st.instructions) {
      if (in.is_sync()) continue;
      bool load = false;
      if (in.op == Opcode::kMatmul) load = !holds || !(stationary == in.src0);
      const ComputeCost c = model->cost(in, {load, load && !loaded_any});
      loaded_any |= load;
      if (load) {
        stationary = in.src0;
        holds = true;
      }
      if (in.op == Opcode::kTranspose) holds = false;
      cycles += c.cycles;
    }
    consider(cycles / frequency(core, k), st.id.name());
  }
  consider(dma_bytes / (core.dma.engines * core.dma.engine_bandwidth_bytes_per_s), "dma engines");
  for (const auto& [what, t] : best.busy) {
    if (t > best.seconds) {
      best.seconds = t;
      best.resource = what;
    }
  }
  return best;
}

}  // namespace neuronsim::kernels::compiler
