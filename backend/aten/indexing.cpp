// Gather, scatter, index, index_put, index_select, index_copy/add and the embedding backward:
// element positions resolved on the host, moved by the kernel library's indexed copies.
#include <ATen/ATen.h>

#include "aten/index_positions.h"
#include "aten/native_ops.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"

namespace neuronsim::backend {
namespace {

using Programs = std::vector<device::Program>;

Programs indexed(const OpInvocation& inv, const at::Tensor& src, const at::Tensor& src_pos,
                 const at::Tensor& dst, const at::Tensor& dst_pos, bool accumulate,
                 const at::Tensor* clone_from = nullptr, float scale = 1.0f,
                 device::AluOp combine = device::AluOp::kAdd) {
  Programs p;
  if (clone_from)
    p.push_back(
        kernels::build_copy(inv.name, inv.describe(*clone_from), inv.describe(dst), inv.core()));
  p.push_back(kernels::build_indexed_copy(inv.name, inv.describe(src), to_vec(src_pos),
                                          inv.describe(dst), to_vec(dst_pos), accumulate,
                                          inv.core(), scale, combine));
  return p;
}

// scatter's reduce argument ("" when absent).
std::string reduce_arg(const OpInvocation& inv) {
  if (!inv.has_arg("reduce")) return "";
  const c10::IValue& r = inv.arg("reduce");
  return r.isString() ? std::string(r.toStringRef()) : "";
}

// The functional variant of an in-place indexing op writes a copy of self first.
const at::Tensor* clone_source(const OpInvocation& inv) {
  const at::Tensor& out = inv.outputs.at(0);
  const at::Tensor self = inv.tensor(0);
  return (self.defined() && !out.is_same(self)) ? &inv.args[0].toTensor() : nullptr;
}

}  // namespace

NativeOpTable indexing_ops() {
  NativeOpTable ops;
  ops.push_back({"aten::index_select", [](const OpInvocation& inv) {
                   const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
                   const int64_t dim = inv.arg("dim").toInt();
                   const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
                   return indexed(inv, self,
                                  positions(self).index_select(
                                      dim < 0 ? dim + std::max<int64_t>(1, self.dim()) : dim,
                                      idx.to(at::kLong)),
                                  out, positions(out), false);
                 }});
  ops.push_back({"aten::gather", [](const OpInvocation& inv) {
                   const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
                   const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
                   return indexed(inv, self, positions(self).gather(inv.arg("dim").toInt(), idx),
                                  out, positions(out), false);
                 }});
  for (const char* n : {"aten::scatter", "aten::scatter_add"}) {
    const bool acc = std::string(n) == "aten::scatter_add";
    ops.push_back(
        {n,
         [acc](const OpInvocation& inv) {
           const at::Tensor out = inv.outputs.at(0);
           const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
           const at::Tensor dst_pos = positions(out).gather(inv.arg("dim").toInt(), idx);
           if (!inv.has_arg("src")) {  // scatter.value: the value fills the positions
             Programs p;
             if (const at::Tensor* from = clone_source(inv)) {
               p.push_back(kernels::build_copy(inv.name, inv.describe(*from), inv.describe(out),
                                               inv.core()));
             }
             p.push_back(kernels::build_indexed_fill(inv.name, inv.describe(out), to_vec(dst_pos),
                                                     static_cast<float>(inv.scalar("value", 0)),
                                                     inv.core()));
             return p;
           }
           const at::Tensor src = inv.arg("src").toTensor();
           std::vector<at::indexing::TensorIndex> sl;
           for (int64_t d = 0; d < idx.dim(); ++d)
             sl.emplace_back(at::indexing::Slice(0, idx.size(d)));
           const at::Tensor src_pos = idx.dim() ? positions(src).index(sl) : positions(src);
           // scatter.reduce: "add" accumulates, "multiply" multiplies in.
           const std::string reduce = reduce_arg(inv);
           return indexed(inv, src, src_pos, out, dst_pos, acc || !reduce.empty(),
                          clone_source(inv), 1.0f,
                          reduce == "multiply" ? device::AluOp::kMultiply : device::AluOp::kAdd);
         },
         // scatter.value_reduce (a value combined in) has no program: CPU fallback.
         [](const OpInvocation& inv) { return inv.has_arg("src") || reduce_arg(inv).empty(); }});
  }
  ops.push_back({"aten::index", [](const OpInvocation& inv) {
                   const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
                   c10::List<std::optional<at::Tensor>> idx;
                   for (const auto& e : inv.arg("indices").toListRef()) {
                     idx.push_back(e.isTensor() && e.toTensor().defined()
                                       ? std::optional<at::Tensor>(on_cpu(e.toTensor()))
                                       : std::nullopt);
                   }
                   return indexed(inv, self, at::index(positions(self), idx), out, positions(out),
                                  false);
                 }});
  for (const char* n : {"aten::index_put", "aten::_index_put_impl"})
    ops.push_back({n, [](const OpInvocation& inv) {
                     const at::Tensor out = inv.outputs.at(0),
                                      values = inv.arg("values").toTensor();
                     c10::List<std::optional<at::Tensor>> idx;
                     for (const auto& e : inv.arg("indices").toListRef()) {
                       idx.push_back(e.isTensor() && e.toTensor().defined()
                                         ? std::optional<at::Tensor>(on_cpu(e.toTensor()))
                                         : std::nullopt);
                     }
                     const at::Tensor dst_pos = at::index(positions(out), idx);
                     const at::Tensor src_pos = positions(values).expand(dst_pos.sizes());
                     const bool acc = inv.has_arg("accumulate") && inv.arg("accumulate").toBool();
                     return indexed(inv, values, src_pos, out, dst_pos, acc, clone_source(inv));
                   }});

  for (const char* n : {"aten::index_copy", "aten::index_add"}) {
    const bool acc = std::string(n) == "aten::index_add";
    ops.push_back(
        {n, [acc](const OpInvocation& inv) {
           const at::Tensor out = inv.outputs.at(0), source = inv.arg("source").toTensor();
           const int64_t dim = inv.arg("dim").toInt();
           const at::Tensor idx = on_cpu(inv.arg("index").toTensor()).to(at::kLong);
           // index_add's alpha scales the source.
           const float alpha = acc ? static_cast<float>(inv.scalar("alpha", 1.0)) : 1.0f;
           return indexed(inv, source, positions(source), out,
                          positions(out).index_select(dim < 0 ? dim + out.dim() : dim, idx), acc,
                          clone_source(inv), alpha);
         }});
  }
  ops.push_back(
      {"aten::embedding_dense_backward", [](const OpInvocation& inv) {
         const at::Tensor g = inv.arg("grad_output").toTensor(), out = inv.outputs.at(0);
         const at::Tensor ids = on_cpu(inv.arg("indices").toTensor()).reshape({-1}).to(at::kLong);
         const int64_t d = out.size(1), pad = inv.arg("padding_idx").toInt();
         const at::Tensor keep = ids != pad;
         const at::Tensor rows = at::arange(ids.numel(), at::kLong).masked_select(keep);
         const at::Tensor cols = at::arange(d, at::kLong);
         const at::Tensor src = (rows.view({-1, 1}) * d + cols).reshape({-1});
         const at::Tensor dst = (ids.masked_select(keep).view({-1, 1}) * d + cols).reshape({-1});
         Programs p{kernels::build_fill(inv.name, inv.describe(out), 0.0f, inv.core())};
         const at::Tensor g2 = g.reshape({-1, d});
         p.push_back(kernels::build_indexed_copy(inv.name, inv.describe(g2), to_vec(src),
                                                 inv.describe(out), to_vec(dst), true, inv.core()));
         return p;
       }});
  return ops;
}

}  // namespace neuronsim::backend
