#include "neuronsim/kernels/compiler/attention_region.h"

#include <optional>
#include <stdexcept>

#include "neuronsim/kernels/attention.h"
#include "neuronsim/kernels/compiler/fusion.h"

namespace neuronsim::kernels::compiler {

device_model::Program build_attention_region(const LoweredGraph& g, const Op& op,
                                             const std::string& name,
                                             const device_model::CoreParams& core) {
  if (op.kind != Op::Kind::kAttention || op.inputs.size() < 3) {
    throw std::invalid_argument(name + ": not an attention op");
  }
  auto desc = [&](int v) {
    const TensorMeta& m = g.graph.value(v).meta;
    return TensorDesc{virtual_address(v), m.dtype, m.sizes, m.strides};
  };
  std::optional<TensorDesc> mask;
  if (op.inputs.size() > 3) mask = desc(op.inputs[3]);
  AttentionSpec spec;
  spec.scale = op.scale;
  spec.causal = op.causal;
  return build_flash_attention(name, desc(op.inputs[0]), desc(op.inputs[1]), desc(op.inputs[2]),
                               desc(op.output), mask, spec, core);
}

}  // namespace neuronsim::kernels::compiler
