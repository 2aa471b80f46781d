#pragma once
// Running a compiled graph (python/neuronsim/torch_compile): its nodes execute on the host as usual
// for their values, but their device programs do not launch one by one. Ops the graph compiler
// fused skip their per-op programs entirely (the fused programs give the time); ops it left to
// the eager kernels build their programs into a list, which the graph's single launch splices in
// where they belong. Nodes that run on the host between launches run as in eager mode.
#include <vector>

#include "neuronsim/device_model/program.h"

namespace neuronsim::backend {

enum class CaptureMode {
  kOff,      // eager: every op launches its programs
  kSkip,     // a fused node of a compiled graph: values only
  kCollect,  // an eager node of a compiled graph: its programs go to the graph's launch
};

CaptureMode capture_mode();

/// Sets the calling thread's mode (and collection target) for its lifetime; nestable.
class CaptureScope {
 public:
  explicit CaptureScope(CaptureMode mode, std::vector<device_model::Program>* target = nullptr);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  CaptureMode previous_;
  std::vector<device_model::Program>* previous_target_;
};

/// kCollect: appends programs to the current eager node's list.
void collect_programs(const std::vector<device_model::Program>& programs);

}  // namespace neuronsim::backend
