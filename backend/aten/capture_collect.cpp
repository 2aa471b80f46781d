// An eager node of a compiled graph (one the compiler left whole): its programs join the graph's
// single launch where the node belongs, built for one physical core (the graph's linker joins
// single-core programs) and outside the program cache (the launch relocates them).
#include "aten/capture_mode.h"
#include "aten/op_capture.h"

namespace neuronsim::backend {
namespace {

class CollectCapture final : public OpCapture {
 public:
  bool eager() const override { return false; }
  bool builds_programs() const override { return true; }
  uint32_t grid(runtime::Runtime&) const override { return 1; }
  void take(const c10::Device&, const std::vector<device_model::Program>& programs, bool,
            bool) const override {
    collect_programs(programs);
  }
};

}  // namespace

const OpCapture& collect_capture() {
  static const CollectCapture capture;
  return capture;
}

}  // namespace neuronsim::backend
