#include "aten/capture_mode.h"

#include "aten/op_capture.h"

namespace neuronsim::backend {
namespace {
thread_local CaptureMode t_mode = CaptureMode::kOff;
thread_local std::vector<device_model::Program>* t_target = nullptr;
}  // namespace

CaptureMode capture_mode() {
  return t_mode;
}

CaptureScope::CaptureScope(CaptureMode mode, std::vector<device_model::Program>* target)
    : previous_(t_mode), previous_target_(t_target) {
  t_mode = mode;
  t_target = target;
}

CaptureScope::~CaptureScope() {
  t_mode = previous_;
  t_target = previous_target_;
}

const OpCapture& op_capture() {
  switch (t_mode) {
    case CaptureMode::kSkip:
      return fused_capture();
    case CaptureMode::kCollect:
      return collect_capture();
    case CaptureMode::kOff:
      break;
  }
  return eager_capture();
}

void collect_programs(const std::vector<device_model::Program>& programs) {
  if (t_target) t_target->insert(t_target->end(), programs.begin(), programs.end());
}

}  // namespace neuronsim::backend
