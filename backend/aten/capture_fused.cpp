// A fused node of a compiled graph: the graph compiler fused the op into a region, so the
// region's programs give its time; the op itself only computes its values and builds nothing.
#include "aten/op_capture.h"

namespace neuronsim::backend {
namespace {

class FusedCapture final : public OpCapture {
 public:
  bool eager() const override { return false; }
  bool builds_programs() const override { return false; }
  uint32_t grid(runtime::Runtime&) const override { return 1; }
  void take(const c10::Device&, const std::vector<device_model::Program>&, bool,
            bool) const override {}
};

}  // namespace

const OpCapture& fused_capture() {
  static const FusedCapture capture;
  return capture;
}

}  // namespace neuronsim::backend
