// Data-dependent output shapes: nonzero and masked_select (whose output size is the count of
// nonzero elements) and nonzero_static (fixed size, padded). The host cannot size the output
// before the device has counted: the count program writes the total to a device counter and the
// host reads it back (a device-to-host sync, modelled by native_boxed's shape_sync). The
// positions are then resolved on the host (index_positions.h), as the runtime's descriptor
// generation does, and the coordinate or copy program writes the output. Values come from ATen's
// CPU kernels on the CPU views; nonzero's int64 output keeps host values in ISA mode.
#include <ATen/ATen.h>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/compaction.h"
#include "neuronsim/kernels/indexing.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

// Row-major flat positions of nonzero's coordinate rows (the first `rows` of them).
std::vector<int64_t> flat_positions(const at::Tensor& coords, at::IntArrayRef sizes, int64_t rows) {
  if (sizes.empty() || rows == 0) return {};
  std::vector<int64_t> stride(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    stride[d] = stride[d + 1] * sizes[d + 1];
  const at::Tensor c = on_cpu(coords).narrow(0, 0, rows).to(at::kLong);
  const at::Tensor s = at::tensor(stride, at::kLong);
  return to_vec((c * s).sum(1));
}

bool real_input(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0);
  return in.defined() && !in.is_complex();
}

Programs nonzero(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0), out = inv.outputs.at(0);
  Programs p{kernels::build_count_nonzero(inv.name + "_count", inv.describe(in),
                                          inv.describe(inv.count), inv.core())};
  p.push_back(kernels::build_coordinates(inv.name, in.sizes().vec(),
                                         flat_positions(out, in.sizes(), out.size(0)),
                                         inv.describe(out), 0.0f, inv.core()));
  return p;
}

Programs nonzero_static(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0), out = inv.outputs.at(0);
  // The valid rows: min(count, size); the rest is padding.
  const int64_t count = at::count_nonzero(on_cpu(in)).item<int64_t>();
  const int64_t rows = std::min<int64_t>(count, out.size(0));
  const float fill = static_cast<float>(inv.scalar("fill_value", -1.0));
  return {kernels::build_coordinates(inv.name, in.sizes().vec(),
                                     flat_positions(out, in.sizes(), rows), inv.describe(out), fill,
                                     inv.core())};
}

Programs masked_select(const OpInvocation& inv) {
  const at::Tensor self = inv.tensor(0), mask = inv.arg("mask").toTensor(), out = inv.outputs.at(0);
  Programs p{kernels::build_count_nonzero(inv.name + "_count", inv.describe(mask),
                                          inv.describe(inv.count), inv.core())};
  const std::vector<int64_t> src = to_vec(at::nonzero(on_cpu(mask).reshape({-1})).reshape({-1}));
  std::vector<int64_t> dst(src.size());
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<int64_t>(i);
  p.push_back(kernels::build_indexed_copy(inv.name, inv.describe(self), src, inv.describe(out), dst,
                                          false, inv.core()));
  return p;
}

}  // namespace

NativeOpTable compaction_ops() {
  NativeOpTable ops;
  NativeOp nz{"aten::nonzero", nonzero, real_input};
  nz.shape_sync = true;
  ops.push_back(nz);
  ops.push_back({"aten::nonzero_static", nonzero_static, real_input});
  NativeOp ms{"aten::masked_select", masked_select, [](const OpInvocation& inv) {
                // Same shapes (no broadcast) and dtypes: a straight compaction of self.
                const at::Tensor self = inv.tensor(0), mask = inv.arg("mask").toTensor();
                return real_input(inv) && mask.defined() && self.sizes().equals(mask.sizes()) &&
                       !at::isComplexType(self.scalar_type());
              }};
  ms.shape_sync = true;
  ops.push_back(ms);
  return ops;
}

}  // namespace neuronsim::backend
