#pragma once
// A compiled graph as PyTorch runs it: the graph compiler's result (kernels/graph/compiler.h)
// plus what a run needs, the device addresses of the tensors its programs touch, the programs
// its eager nodes built, and one launch per segment.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "neuronsim/kernels/compiler/compiler.h"

namespace neuronsim::backend {

class CompiledGraphRun {
 public:
  explicit CompiledGraphRun(kernels::compiler::CompiledGraph cg);

  const kernels::compiler::CompiledGraph& compiled() const { return cg_; }
  /// Where an eager node's programs go while it runs (aten/capture_mode.h).
  std::vector<device_model::Program>* collect_target(int node);

  /// Starts a run: in ISA mode, saves the graph inputs the graph writes (they are restored
  /// before the launch, whose programs then compute them from the original values).
  void begin(const std::vector<at::Tensor>& inputs);
  /// Launches segment `segment`: `tensors` holds the tensor of each of its values
  /// (Segment::values), whose layouts must be the traced ones.
  void launch(int segment, const std::vector<at::Tensor>& tensors);

 private:
  /// Whether a fused region of this segment writes `value`.
  bool written_here(int segment, int value) const;

  kernels::compiler::CompiledGraph cg_;
  std::map<int, std::vector<device_model::Program>> collected_;
  std::vector<int> mutated_inputs_;  // positions in the graph's inputs
  // Per segment: its prelinked program ran once, so it was validated. Relocation changes only
  // HBM addresses, and those are live tensors of the traced layouts (checked at each launch).
  std::vector<bool> validated_;
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> saved_host_;  // CPU scalars
};

}  // namespace neuronsim::backend
