#include "neuronsim/kernels/ops/device_copy.h"

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/spmd.h"

namespace neuronsim::kernels::ops {
namespace {

bool typed(const TensorArg& t) {
  return device_dtype(t.type).has_value();
}

}  // namespace

bool device_copy_supported(const TensorArg& src, const TensorArg& dst) {
  return (typed(src) && typed(dst)) || src.type == dst.type;
}

Programs device_copy_programs(const TensorArg& src, const TensorArg& dst,
                              const TensorDesc& src_bytes, const TensorDesc& dst_bytes,
                              const device_model::CoreParams& core, uint32_t grid) {
  const bool both_typed = typed(src) && typed(dst);
  // To bool: x != 0 (a numeric conversion would round 0.5 to 0 and saturate -2 to 0).
  if (both_typed && dst.type == ScalarType::kBool && src.type != ScalarType::kBool) {
    Expr e;
    e.alu(device_model::AluOp::kNotEqual, Arg::input(0), Arg::constant(0.0f));
    return {build_elementwise("copy", {src.desc}, dst.desc, e, core)};
  }
  if (both_typed) return {build_copy_grid("copy", src.desc, dst.desc, core, grid)};
  return {build_copy_grid("copy", src_bytes, dst_bytes, core, grid)};
}

}  // namespace neuronsim::kernels::ops
