#pragma once
// Where a native op's programs go, by the calling thread's capture mode (aten/capture_mode.h):
// an eager op launches them; a fused node of a compiled graph builds none (the graph's fused
// programs give its time); an eager node of a compiled graph hands them to the graph's launch.
// One strategy per mode, each in its file (capture_eager.cpp, capture_fused.cpp,
// capture_collect.cpp).
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

#include "neuronsim/device_model/program.h"
#include "neuronsim/runtime/runtime.h"

namespace neuronsim::backend {

class OpCapture {
 public:
  virtual ~OpCapture() = default;
  /// An eager op: its own span on the trace, support checks, ISA mode's computing programs and
  /// the program cache. Nodes of a compiled graph are part of the graph's kernels.
  virtual bool eager() const = 0;
  /// Whether the op's programs are built at all.
  virtual bool builds_programs() const = 0;
  /// Physical cores an op's launch may span: the logical core's, or 1 inside a compiled graph
  /// (its linker joins single-core programs).
  virtual uint32_t grid(runtime::Runtime& r) const = 0;
  /// Runs (or hands over) the programs. `functional`: they compute the values (ISA mode);
  /// `validated`: they come from the program cache.
  virtual void take(const c10::Device& device, const std::vector<device_model::Program>& programs,
                    bool functional, bool validated) const = 0;
};

/// The calling thread's strategy.
const OpCapture& op_capture();

const OpCapture& eager_capture();
const OpCapture& fused_capture();
const OpCapture& collect_capture();

}  // namespace neuronsim::backend
