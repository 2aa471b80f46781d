// Data-dependent output shapes: nonzero and masked_select (whose output size is the count of
// nonzero elements) and nonzero_static (fixed size, padded). The host cannot size the output
// before the device has counted: the count program writes the total to a device counter and the
// host reads it back (shape_sync). The positions are then resolved on the host
// (ops/tensor_values.h), as the runtime's descriptor generation does, and the coordinate or copy
// program writes the output. nonzero's int64 output keeps host values in ISA mode.
#include <algorithm>

#include "neuronsim/kernels/compaction.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

// Row-major flat positions of the first `rows` nonzero elements of `in`.
std::vector<int64_t> nonzero_positions(const TensorArg& in, int64_t rows) {
  std::vector<int64_t> out;
  const std::vector<double> v = read_doubles(in);
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(out.size()) < rows; ++i) {
    if (v[i] != 0.0) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

bool real_input(const OpCall& call) {
  const TensorArg in = call.tensor(0);
  return in.defined && !is_complex(in.type);
}

Programs nonzero(const OpCall& call) {
  const TensorArg in = call.tensor(0), out = call.output(0);
  Programs p{build_count_nonzero(call.name() + "_count", in.desc, call.count().desc, call.core())};
  p.push_back(build_coordinates(call.name(), in.sizes(), nonzero_positions(in, out.size(0)),
                                out.desc, 0.0f, call.core()));
  return p;
}

Programs nonzero_static(const OpCall& call) {
  const TensorArg in = call.tensor(0), out = call.output(0);
  // The valid rows: min(count, size); the rest is padding.
  const float fill = static_cast<float>(call.number("fill_value", -1.0));
  return {build_coordinates(call.name(), in.sizes(), nonzero_positions(in, out.size(0)), out.desc,
                            fill, call.core())};
}

Programs masked_select(const OpCall& call) {
  const TensorArg self = call.tensor(0), mask = call.tensor("mask"), out = call.output(0);
  Programs p{
      build_count_nonzero(call.name() + "_count", mask.desc, call.count().desc, call.core())};
  const std::vector<int64_t> src = nonzero_positions(mask, static_cast<int64_t>(mask.numel()));
  std::vector<int64_t> dst(src.size());
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<int64_t>(i);
  p.push_back(build_indexed_copy(call.name(), self.desc, src, out.desc, dst, false, call.core()));
  return p;
}

}  // namespace

std::vector<OpRule> compaction_rules() {
  OpRule nz;
  nz.name = "aten::nonzero";
  nz.build = nonzero;
  nz.supports = real_input;
  nz.shape_sync = true;
  OpRule nzs;
  nzs.name = "aten::nonzero_static";
  nzs.build = nonzero_static;
  nzs.supports = real_input;
  OpRule ms;
  ms.name = "aten::masked_select";
  ms.build = masked_select;
  ms.supports = [](const OpCall& call) {
    // Same shapes (no broadcast) and dtypes: a straight compaction of self.
    const TensorArg self = call.tensor(0), mask = call.tensor("mask");
    return real_input(call) && mask.defined && self.sizes() == mask.sizes();
  };
  ms.shape_sync = true;
  return {nz, nzs, ms};
}

}  // namespace neuronsim::kernels::ops
