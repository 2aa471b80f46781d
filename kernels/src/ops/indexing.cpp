// Gather, scatter, index, index_put, index_select, index_copy/add and the embedding backward:
// element positions resolved on the host from the index tensors (ops/tensor_values.h), as the
// runtime's descriptor generation does, moved by the kernel library's indexed copies.
#include <stdexcept>

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/ops/tensor_values.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

Programs indexed(const OpCall& call, const TensorArg& src, const std::vector<int64_t>& src_pos,
                 const TensorArg& dst, const std::vector<int64_t>& dst_pos, bool accumulate,
                 const TensorArg* clone_from = nullptr, float scale = 1.0f,
                 device_model::AluOp combine = device_model::AluOp::kAdd) {
  Programs p;
  if (clone_from) p.push_back(build_copy(call.name(), clone_from->desc, dst.desc, call.core()));
  p.push_back(build_indexed_copy(call.name(), src.desc, src_pos, dst.desc, dst_pos, accumulate,
                                 call.core(), scale, combine));
  return p;
}

// The functional variant of an in-place indexing op writes a copy of self first.
std::optional<TensorArg> clone_source(const OpCall& call) {
  const TensorArg self = call.tensor(0), out = call.output(0);
  if (!self.defined || self.desc.address == out.desc.address) return std::nullopt;
  return self;
}

// Tensor?[] indices as advanced indexing takes them: a bool (or byte) mask stands for the
// coordinates of its nonzero elements, one index tensor per mask dim.
std::vector<Positions::Index> index_list(const std::vector<TensorArg>& tensors) {
  std::vector<Positions::Index> out;
  for (const TensorArg& t : tensors) {
    if (!t.defined) {
      out.push_back({});
      continue;
    }
    if (t.type == ScalarType::kBool || t.type == ScalarType::kUInt8) {
      const std::vector<int64_t> mask = read_integers(t);
      std::vector<std::vector<int64_t>> per_dim(static_cast<size_t>(t.dim()));
      for (size_t i = 0; i < mask.size(); ++i) {
        if (!mask[i]) continue;
        int64_t rest = static_cast<int64_t>(i);
        for (int64_t d = t.dim() - 1; d >= 0; --d) {
          per_dim[static_cast<size_t>(d)].push_back(rest % t.size(d));
          rest /= t.size(d);
        }
      }
      for (auto& coords : per_dim) {
        const int64_t n = static_cast<int64_t>(coords.size());
        out.push_back({true, {n}, std::move(coords)});
      }
      continue;
    }
    out.push_back({true, t.sizes(), read_integers(t)});
  }
  return out;
}

}  // namespace

std::vector<OpRule> indexing_rules() {
  std::vector<OpRule> ops;
  ops.push_back(make_rule("aten::index_select", [](const OpCall& call) {
    const TensorArg self = call.tensor(0), out = call.output(0);
    const int64_t dim = call.dim("dim", self.dim());
    const Positions src =
        Positions::of(self.sizes()).index_select(dim, read_integers(call.tensor("index")));
    return indexed(call, self, src.values, out, Positions::of(out.sizes()).values, false);
  }));
  ops.push_back(make_rule("aten::gather", [](const OpCall& call) {
    const TensorArg self = call.tensor(0), out = call.output(0), index = call.tensor("index");
    const int64_t dim = call.dim("dim", self.dim());
    const Positions src =
        Positions::of(self.sizes()).gather(dim, index.sizes(), read_integers(index));
    return indexed(call, self, src.values, out, Positions::of(out.sizes()).values, false);
  }));
  for (const char* n : {"aten::scatter", "aten::scatter_add"}) {
    const bool acc = std::string(n) == "aten::scatter_add";
    ops.push_back(make_rule(
        n,
        [acc](const OpCall& call) {
          const TensorArg out = call.output(0), index = call.tensor("index");
          const int64_t dim = call.dim("dim", out.dim());
          const Positions dst =
              Positions::of(out.sizes()).gather(dim, index.sizes(), read_integers(index));
          const std::optional<TensorArg> from = clone_source(call);
          if (!call.in_schema("src")) {  // scatter.value: the value fills the positions
            Programs p;
            if (from) p.push_back(build_copy(call.name(), from->desc, out.desc, call.core()));
            p.push_back(build_indexed_fill(call.name(), out.desc, dst.values,
                                           static_cast<float>(call.number("value", 0)),
                                           call.core()));
            return p;
          }
          const TensorArg src = call.tensor("src");
          const Positions src_pos = index.dim() ? Positions::of(src.sizes()).leading(index.sizes())
                                                : Positions::of(src.sizes());
          // scatter.reduce: "add" accumulates, "multiply" multiplies in.
          const std::string reduce = call.str("reduce");
          return indexed(
              call, src, src_pos.values, out, dst.values, acc || !reduce.empty(),
              from ? &*from : nullptr, 1.0f,
              reduce == "multiply" ? device_model::AluOp::kMultiply : device_model::AluOp::kAdd);
        },
        // scatter.value_reduce (a value combined in) has no program: CPU fallback.
        [](const OpCall& call) { return call.in_schema("src") || call.str("reduce").empty(); }));
  }
  ops.push_back(make_rule("aten::index", [](const OpCall& call) {
    const TensorArg self = call.tensor(0), out = call.output(0);
    const Positions src = Positions::of(self.sizes()).index(index_list(call.tensors("indices")));
    return indexed(call, self, src.values, out, Positions::of(out.sizes()).values, false);
  }));
  for (const char* n : {"aten::index_put", "aten::_index_put_impl"}) {
    ops.push_back(make_rule(n, [](const OpCall& call) {
      const TensorArg out = call.output(0), values = call.tensor("values");
      const Positions dst = Positions::of(out.sizes()).index(index_list(call.tensors("indices")));
      const Positions src = Positions::of(values.sizes()).expand(dst.sizes);
      const std::optional<TensorArg> from = clone_source(call);
      return indexed(call, values, src.values, out, dst.values, call.boolean("accumulate", false),
                     from ? &*from : nullptr);
    }));
  }
  for (const char* n : {"aten::index_copy", "aten::index_add"}) {
    const bool acc = std::string(n) == "aten::index_add";
    ops.push_back(make_rule(n, [acc](const OpCall& call) {
      const TensorArg out = call.output(0), source = call.tensor("source");
      const int64_t dim = call.dim("dim", out.dim());
      // index_add's alpha scales the source.
      const float alpha = acc ? static_cast<float>(call.number("alpha", 1.0)) : 1.0f;
      const Positions dst =
          Positions::of(out.sizes()).index_select(dim, read_integers(call.tensor("index")));
      const std::optional<TensorArg> from = clone_source(call);
      return indexed(call, source, Positions::of(source.sizes()).values, out, dst.values, acc,
                     from ? &*from : nullptr, alpha);
    }));
  }
  ops.push_back(make_rule("aten::embedding_dense_backward", [](const OpCall& call) {
    const TensorArg g = call.tensor("grad_output"), out = call.output(0);
    const std::vector<int64_t> ids = read_integers(call.tensor("indices"));
    const int64_t d = out.size(1), pad = call.integer("padding_idx", -1);
    std::vector<int64_t> src, dst;
    for (size_t row = 0; row < ids.size(); ++row) {
      if (ids[row] == pad) continue;
      for (int64_t c = 0; c < d; ++c) {
        src.push_back(static_cast<int64_t>(row) * d + c);
        dst.push_back(ids[row] * d + c);
      }
    }
    // grad_output as [rows, d] (contiguous in its last dim, as autograd hands it over).
    TensorDesc g2 = g.desc;
    g2.sizes = {static_cast<int64_t>(ids.size()), d};
    g2.strides = {g.desc.strides.size() >= 2 ? g.desc.strides[g.desc.strides.size() - 2] : d,
                  g.desc.strides.empty() ? 1 : g.desc.strides.back()};
    Programs p{build_fill(call.name(), out.desc, 0.0f, call.core())};
    p.push_back(build_indexed_copy(call.name(), g2, src, out.desc, dst, true, call.core()));
    return p;
  }));
  return ops;
}

}  // namespace neuronsim::kernels::ops
