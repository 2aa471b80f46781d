// Timing (and ISA-mode function) of the library kernels beyond elementwise: copies, reductions,
// matmul, softmax, layer norm, indexing, cat and losses. Index-dependent kernels resolve element
// positions on the host with ATen, as the runtime's descriptor generation would.
#include <ATen/ATen.h>

#include "aten/native_boxed.h"
#include "aten/tensor_desc.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/indexing.h"
#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/normalization.h"
#include "neuronsim/kernels/reduction.h"
#include "neuronsim/kernels/tiling.h"
#include "neuronsim/runtime/runtime.h"

namespace neuronsim::backend {
namespace {

using device::Program;
using Programs = std::vector<Program>;

const device::CoreParams& core() {
  return runtime::Runtime::instance().device().params().core;
}

std::vector<int64_t> dims_arg(const OpInvocation& inv, const std::string& name, int64_t ndim) {
  std::vector<int64_t> out;
  if (!inv.has_arg(name)) return out;
  const c10::IValue& v = inv.arg(name);
  // A 0-d tensor's only dim (0 or -1) is the whole tensor: reduce everything.
  if (v.isNone() || ndim == 0) return out;
  if (v.isInt())
    out.push_back(v.toInt());
  else if (v.isIntList())
    out = v.toIntVector();
  for (auto& d : out) d = d < 0 ? d + ndim : d;
  return out;
}

bool keepdim_arg(const OpInvocation& inv) {
  return inv.has_arg("keepdim") && inv.arg("keepdim").isBool() && inv.arg("keepdim").toBool();
}

int64_t reduced_count(const at::Tensor& in, const std::vector<int64_t>& dims) {
  if (dims.empty()) return in.numel();
  int64_t n = 1;
  for (int64_t d : dims) n *= in.size(d);
  return n;
}

// Positions (logical row-major element indices) of every element of `t`, as a CPU int64 tensor
// with t's shape.
at::Tensor positions(const at::Tensor& t) {
  return at::arange(t.numel(), at::TensorOptions().dtype(at::kLong)).view(t.sizes());
}

std::vector<int64_t> to_vec(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().to(at::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Tensor on_cpu(const at::Tensor& t) {
  return t.device().is_privateuseone() ? cpu_view(t) : t;
}

void reg(const std::string& name, TimingBuilder fn, SupportCheck supports = nullptr) {
  register_timing(name, std::move(fn), std::move(supports));
}

bool all_float(const OpInvocation& inv) {
  for (const auto& v : inv.args) {
    if (v.isTensor() && v.toTensor().defined() && !c10::isFloatingType(v.toTensor().scalar_type()))
      return false;
  }
  return true;
}

// The reduction kernel folds the reduced dims (coalesced as it does) into at most two runs.
bool reduce_supported(const OpInvocation& inv) {
  const at::Tensor in = inv.tensor(0);
  if (!in.defined()) return false;
  std::vector<int64_t> dims = dims_arg(inv, "dim", in.dim());
  std::vector<bool> red(in.dim(), dims.empty());
  for (int64_t d : dims) red.at(d) = true;
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(1);
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (!red[d]) continue;
    sizes.push_back(in.size(d));
    strides[0].push_back(in.stride(d));
  }
  kernels::coalesce(sizes, strides);
  return sizes.size() <= 2;
}

Programs reduce_program(const OpInvocation& inv, const at::Tensor& in, const at::Tensor& out,
                        kernels::ReduceSpec spec) {
  spec.dims = dims_arg(inv, "dim", in.dim());
  return {kernels::build_reduce(inv.name, describe(in), describe(out), spec, core())};
}

void register_reductions() {
  auto simple = [](device::ReduceOp op, bool mean) {
    return [op, mean](const OpInvocation& inv) {
      const at::Tensor in = inv.tensor(0);
      kernels::ReduceSpec s;
      s.op = op;
      if (mean)
        s.scale = 1.0f / static_cast<float>(std::max<int64_t>(
                             1, reduced_count(in, dims_arg(inv, "dim", in.dim()))));
      return reduce_program(inv, in, inv.outputs.at(0), s);
    };
  };
  reg("aten::sum", simple(device::ReduceOp::kAdd, false), reduce_supported);
  reg("aten::mean", simple(device::ReduceOp::kAdd, true), reduce_supported);
  reg("aten::amax", simple(device::ReduceOp::kMax, false), reduce_supported);
  reg("aten::amin", simple(device::ReduceOp::kMin, false), reduce_supported);
  reg("aten::prod", simple(device::ReduceOp::kMultiply, false), reduce_supported);
  for (const char* n : {"aten::max", "aten::min"}) {
    const auto op = std::string(n) == "aten::max" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    reg(
        n,
        [op](const OpInvocation& inv) {
          const at::Tensor in = inv.tensor(0);
          kernels::ReduceSpec s;
          s.op = op;
          Programs p = reduce_program(inv, in, inv.outputs.at(0), s);
          if (inv.outputs.size() > 1 && inv.outputs[1].defined()) {  // max.dim: values and indices
            s.arg = true;
            auto more = reduce_program(inv, in, inv.outputs[1], s);
            p.insert(p.end(), more.begin(), more.end());
          }
          return p;
        },
        reduce_supported);
  }
  for (const char* n : {"aten::argmax", "aten::argmin"}) {
    const auto op =
        std::string(n) == "aten::argmax" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    reg(
        n,
        [op](const OpInvocation& inv) {
          kernels::ReduceSpec s;
          s.op = op;
          s.arg = true;
          return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
        },
        reduce_supported);
  }
  for (const char* n : {"aten::any", "aten::all"}) {
    const auto op = std::string(n) == "aten::any" ? device::ReduceOp::kMax : device::ReduceOp::kMin;
    reg(
        n,
        [op](const OpInvocation& inv) {
          kernels::ReduceSpec s;
          s.op = op;
          s.nonzero = true;
          return reduce_program(inv, inv.tensor(0), inv.outputs.at(0), s);
        },
        reduce_supported);
  }
  for (const char* n : {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"}) {
    const std::string name = n;
    reg(
        n,
        [name](const OpInvocation& inv) {
          const at::Tensor in = inv.tensor(0);
          const int64_t count = reduced_count(in, dims_arg(inv, "dim", in.dim()));
          double correction = 1.0;
          if (inv.has_arg("correction") && !inv.arg("correction").isNone()) {
            correction = inv.arg("correction").toScalar().toDouble();
          } else if (inv.has_arg("unbiased") && inv.arg("unbiased").isBool()) {
            correction = inv.arg("unbiased").toBool() ? 1.0 : 0.0;
          }
          kernels::ReduceSpec s;
          s.variance = true;
          s.sqrt = name.find("std") != std::string::npos;
          s.scale = 1.0f / static_cast<float>(
                               std::max<double>(1.0, static_cast<double>(count) - correction));
          Programs p = reduce_program(inv, in, inv.outputs.at(0), s);
          if (inv.outputs.size() > 1) {
            kernels::ReduceSpec m;
            m.scale = 1.0f / static_cast<float>(std::max<int64_t>(1, count));
            auto more = reduce_program(inv, in, inv.outputs[1], m);
            p.insert(p.end(), more.begin(), more.end());
          }
          return p;
        },
        reduce_supported);
  }
}

kernels::TensorDesc as_matrix(const at::Tensor& t, bool column) {
  // A vector operand of mv/dot as an [n, 1] (column) or [1, n] (row) matrix.
  kernels::TensorDesc d = describe(t);
  if (t.dim() == 1) {
    const int64_t s = d.strides[0];
    if (column) {
      d.sizes = {t.size(0), 1};
      d.strides = {s, 1};
    } else {
      d.sizes = {1, t.size(0)};
      d.strides = {s * t.size(0), s};
    }
  }
  return d;
}

void register_matmul() {
  auto build = [](const OpInvocation& inv, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor* bias, float alpha, float beta) {
    kernels::MatmulSpec spec;
    spec.alpha = alpha;
    spec.beta = beta;
    const at::Tensor& out = inv.outputs.at(0);
    kernels::TensorDesc c = describe(out);
    if (out.dim() == 1) c = as_matrix(out, b.dim() == 1 ? true : false);
    if (out.dim() == 0) c = kernels::TensorDesc{c.address, c.dtype, {1, 1}, {1, 1}};
    std::optional<kernels::TensorDesc> bd;
    if (bias && bias->defined() && beta != 0.0f) bd = describe(*bias);
    return Programs{kernels::build_matmul(inv.name, as_matrix(a, false), as_matrix(b, true), c, bd,
                                          spec, core())};
  };
  // TensorE multiplies floating-point data only; integer matmuls take the CPU fallback.
  for (const char* n : {"aten::mm", "aten::bmm", "aten::mv", "aten::dot"}) {
    reg(
        n,
        [build](const OpInvocation& inv) {
          return build(inv, inv.tensor(0), inv.tensor(1), nullptr, 1, 0);
        },
        all_float);
  }
  for (const char* n : {"aten::addmm", "aten::baddbmm", "aten::addmv"}) {
    reg(
        n,
        [build](const OpInvocation& inv) {
          const at::Tensor bias = inv.tensor(0);
          return build(inv, inv.tensor(1), inv.tensor(2), &bias,
                       static_cast<float>(inv.scalar("alpha", 1)),
                       static_cast<float>(inv.scalar("beta", 1)));
        },
        all_float);
  }
}

void register_normalizations() {
  for (const char* n : {"aten::_softmax", "aten::_log_softmax"}) {
    const bool log = std::string(n) == "aten::_log_softmax";
    reg(n, [log](const OpInvocation& inv) {
      const at::Tensor in = inv.tensor(0);
      return Programs{kernels::build_softmax(inv.name, describe(in), describe(inv.outputs.at(0)),
                                             inv.arg("dim").toInt(), log, core())};
    });
  }
  for (const char* n : {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"}) {
    const bool log = std::string(n) == "aten::_log_softmax_backward_data";
    reg(n, [log](const OpInvocation& inv) {
      return Programs{kernels::build_softmax_backward(
          inv.name, describe(inv.tensor(0)), describe(inv.tensor(1)), describe(inv.outputs.at(0)),
          inv.arg("dim").toInt(), log, core())};
    });
  }
  reg("aten::native_layer_norm", [](const OpInvocation& inv) {
    kernels::LayerNormIo io;
    io.in = describe(inv.tensor(0));
    io.out = describe(inv.outputs.at(0));
    io.normalized_dims = static_cast<int64_t>(inv.arg("normalized_shape").toIntVector().size());
    const at::Tensor w = inv.arg("weight").isTensor() ? inv.arg("weight").toTensor() : at::Tensor();
    const at::Tensor b = inv.arg("bias").isTensor() ? inv.arg("bias").toTensor() : at::Tensor();
    if (w.defined()) io.weight = describe(w);
    if (b.defined()) io.bias = describe(b);
    if (inv.outputs.size() > 2 && inv.outputs[1].defined() && inv.outputs[1].numel() > 0) {
      io.mean = describe(inv.outputs[1]);
      io.rstd = describe(inv.outputs[2]);
    }
    io.eps = static_cast<float>(inv.scalar("eps", 1e-5));
    return Programs{kernels::build_layer_norm(inv.name, io, core())};
  });
  reg(
      "aten::native_layer_norm_backward",
      [](const OpInvocation& inv) {
        kernels::LayerNormBackwardIo io;
        io.grad_out = describe(inv.arg("grad_out").toTensor());
        io.in = describe(inv.arg("input").toTensor());
        io.mean = describe(inv.arg("mean").toTensor());
        io.rstd = describe(inv.arg("rstd").toTensor());
        io.normalized_dims = static_cast<int64_t>(inv.arg("normalized_shape").toIntVector().size());
        if (inv.arg("weight").isTensor() && inv.arg("weight").toTensor().defined()) {
          io.weight = describe(inv.arg("weight").toTensor());
        }
        if (inv.outputs.size() > 0 && inv.outputs[0].defined())
          io.grad_in = describe(inv.outputs[0]);
        if (inv.outputs.size() > 1 && inv.outputs[1].defined())
          io.grad_weight = describe(inv.outputs[1]);
        if (inv.outputs.size() > 2 && inv.outputs[2].defined())
          io.grad_bias = describe(inv.outputs[2]);
        return Programs{kernels::build_layer_norm_backward(inv.name, io, core())};
      },
      [](const OpInvocation& inv) {
        // One pass per row: the normalized size must fit SBUF and eight PSUM-bank column sums.
        int64_t d = 1;
        for (int64_t s : inv.arg("normalized_shape").toIntVector()) d *= s;
        return d <= 4096;
      });
}

Programs indexed(const OpInvocation& inv, const at::Tensor& src, const at::Tensor& src_pos,
                 const at::Tensor& dst, const at::Tensor& dst_pos, bool accumulate,
                 const at::Tensor* clone_from = nullptr) {
  Programs p;
  if (clone_from)
    p.push_back(kernels::build_copy(inv.name, describe(*clone_from), describe(dst), core()));
  p.push_back(kernels::build_indexed_copy(inv.name, describe(src), to_vec(src_pos), describe(dst),
                                          to_vec(dst_pos), accumulate, core()));
  return p;
}

// The functional variant of an in-place indexing op writes a copy of self first.
const at::Tensor* clone_source(const OpInvocation& inv) {
  const at::Tensor& out = inv.outputs.at(0);
  const at::Tensor self = inv.tensor(0);
  return (self.defined() && !out.is_same(self)) ? &inv.args[0].toTensor() : nullptr;
}

void register_indexing() {
  reg("aten::index_select", [](const OpInvocation& inv) {
    const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
    const int64_t dim = inv.arg("dim").toInt();
    const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
    return indexed(inv, self,
                   positions(self).index_select(
                       dim < 0 ? dim + std::max<int64_t>(1, self.dim()) : dim, idx.to(at::kLong)),
                   out, positions(out), false);
  });
  reg("aten::gather", [](const OpInvocation& inv) {
    const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
    const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
    return indexed(inv, self, positions(self).gather(inv.arg("dim").toInt(), idx), out,
                   positions(out), false);
  });
  for (const char* n : {"aten::scatter", "aten::scatter_add"}) {
    const bool acc = std::string(n) == "aten::scatter_add";
    reg(n, [acc](const OpInvocation& inv) {
      const at::Tensor out = inv.outputs.at(0);
      const at::Tensor idx = on_cpu(inv.arg("index").toTensor());
      const at::Tensor dst_pos = positions(out).gather(inv.arg("dim").toInt(), idx);
      if (!inv.has_arg("src")) {  // scatter.value: the value fills the positions
        Programs p;
        if (const at::Tensor* from = clone_source(inv)) {
          p.push_back(kernels::build_copy(inv.name, describe(*from), describe(out), core()));
        }
        p.push_back(kernels::build_indexed_fill(inv.name, describe(out), to_vec(dst_pos),
                                                static_cast<float>(inv.scalar("value", 0)),
                                                core()));
        return p;
      }
      const at::Tensor src = inv.arg("src").toTensor();
      std::vector<at::indexing::TensorIndex> sl;
      for (int64_t d = 0; d < idx.dim(); ++d) sl.emplace_back(at::indexing::Slice(0, idx.size(d)));
      const at::Tensor src_pos = idx.dim() ? positions(src).index(sl) : positions(src);
      return indexed(inv, src, src_pos, out, dst_pos, acc, clone_source(inv));
    });
  }
  reg("aten::index", [](const OpInvocation& inv) {
    const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
    c10::List<std::optional<at::Tensor>> idx;
    for (const auto& e : inv.arg("indices").toListRef()) {
      idx.push_back(e.isTensor() && e.toTensor().defined()
                        ? std::optional<at::Tensor>(on_cpu(e.toTensor()))
                        : std::nullopt);
    }
    return indexed(inv, self, at::index(positions(self), idx), out, positions(out), false);
  });
  for (const char* n : {"aten::index_put", "aten::_index_put_impl"})
    reg(n, [](const OpInvocation& inv) {
      const at::Tensor out = inv.outputs.at(0), values = inv.arg("values").toTensor();
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
    });

  for (const char* n : {"aten::index_copy", "aten::index_add"}) {
    const bool acc = std::string(n) == "aten::index_add";
    reg(n, [acc](const OpInvocation& inv) {
      const at::Tensor out = inv.outputs.at(0), source = inv.arg("source").toTensor();
      const int64_t dim = inv.arg("dim").toInt();
      const at::Tensor idx = on_cpu(inv.arg("index").toTensor()).to(at::kLong);
      return indexed(inv, source, positions(source), out,
                     positions(out).index_select(dim < 0 ? dim + out.dim() : dim, idx), acc,
                     clone_source(inv));
    });
  }
  reg("aten::embedding_dense_backward", [](const OpInvocation& inv) {
    const at::Tensor g = inv.arg("grad_output").toTensor(), out = inv.outputs.at(0);
    const at::Tensor ids = on_cpu(inv.arg("indices").toTensor()).reshape({-1}).to(at::kLong);
    const int64_t d = out.size(1), pad = inv.arg("padding_idx").toInt();
    const at::Tensor keep = ids != pad;
    const at::Tensor rows = at::arange(ids.numel(), at::kLong).masked_select(keep);
    const at::Tensor cols = at::arange(d, at::kLong);
    const at::Tensor src = (rows.view({-1, 1}) * d + cols).reshape({-1});
    const at::Tensor dst = (ids.masked_select(keep).view({-1, 1}) * d + cols).reshape({-1});
    Programs p{kernels::build_fill(inv.name, describe(out), 0.0f, core())};
    const at::Tensor g2 = g.reshape({-1, d});
    p.push_back(kernels::build_indexed_copy(inv.name, describe(g2), to_vec(src), describe(out),
                                            to_vec(dst), true, core()));
    return p;
  });
  reg("aten::cat", [](const OpInvocation& inv) {
    const at::Tensor out = inv.outputs.at(0);
    int64_t dim = inv.arg("dim").toInt();
    if (dim < 0) dim += out.dim();
    std::vector<std::pair<kernels::TensorDesc, kernels::TensorDesc>> pairs;
    int64_t off = 0;
    for (const at::Tensor& t : inv.arg("tensors").toTensorList()) {
      if (t.dim() == 1 && t.numel() == 0 && out.dim() > 1) continue;  // legacy empty inputs
      if (t.numel()) pairs.emplace_back(describe(t), describe(out.narrow(dim, off, t.size(dim))));
      off += t.size(dim);
    }
    return Programs{kernels::build_copies(inv.name, pairs, core())};
  });
  for (const char* n : {"aten::tril", "aten::triu"}) {
    const bool lower = std::string(n) == "aten::tril";
    reg(
        n,
        [lower](const OpInvocation& inv) {
          return Programs{kernels::build_triangle(inv.name, describe(inv.tensor(0)),
                                                  describe(inv.outputs.at(0)),
                                                  inv.arg("diagonal").toInt(), lower, core())};
        },
        [](const OpInvocation& inv) { return inv.tensor(0).dim() >= 2; });
  }
  reg("aten::arange", [](const OpInvocation& inv) {
    return Programs{kernels::build_arange(inv.name, describe(inv.outputs.at(0)),
                                          inv.scalar("start", 0), inv.scalar("step", 1), core())};
  });
  reg("aten::clone", [](const OpInvocation& inv) {
    return Programs{kernels::build_copy(inv.name, describe(inv.tensor(0)),
                                        describe(inv.outputs.at(0)), core())};
  });
}

void register_losses() {
  // nll_loss: gather each row's target log-probability, then reduce.
  reg("aten::nll_loss_forward", [](const OpInvocation& inv) {
    const at::Tensor self = inv.tensor(0), out = inv.outputs.at(0);
    const at::Tensor target = on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
    const int64_t ignore = inv.arg("ignore_index").toInt();
    const at::Tensor keep = target != ignore;
    const int64_t c = self.dim() == 1 ? self.numel() : self.size(-1);
    const at::Tensor rows = at::arange(target.numel(), at::kLong).masked_select(keep);
    const at::Tensor pos = rows * c + target.masked_select(keep);
    Programs p;
    // The picked values land in the per-sample output (reduction none) or in total_weight's
    // slot as scratch before the reduction writes the scalar.
    const at::Tensor picked =
        out.numel() == rows.numel() && out.numel() > 0 ? out : inv.outputs.at(1);
    if (pos.numel() && picked.numel() >= 1) {
      p.push_back(kernels::build_indexed_copy(inv.name, describe(self.reshape({-1})), to_vec(pos),
                                              describe(picked.reshape({-1})),
                                              std::vector<int64_t>(pos.numel(), 0), false, core()));
    }
    kernels::ReduceSpec s;
    s.scale = 1.0f / static_cast<float>(std::max<int64_t>(1, pos.numel()));
    if (out.numel() == 1) {
      p.push_back(kernels::build_reduce(
          inv.name, describe(self.reshape({-1}).narrow(0, 0, std::max<int64_t>(1, pos.numel()))),
          describe(out.reshape({1})), s, core()));
    }
    return p;
  });
  reg("aten::nll_loss_backward", [](const OpInvocation& inv) {
    const at::Tensor out = inv.outputs.at(0);
    const at::Tensor target = on_cpu(inv.arg("target").toTensor()).reshape({-1}).to(at::kLong);
    const int64_t ignore = inv.arg("ignore_index").toInt();
    const at::Tensor keep = target != ignore;
    const int64_t c = out.dim() == 1 ? out.numel() : out.size(-1);
    const at::Tensor pos =
        at::arange(target.numel(), at::kLong).masked_select(keep) * c + target.masked_select(keep);
    Programs p{kernels::build_fill(inv.name, describe(out), 0.0f, core())};
    const at::Tensor g = inv.arg("grad_output").toTensor().reshape({-1});
    if (pos.numel()) {
      p.push_back(
          kernels::build_indexed_copy(inv.name, describe(g), std::vector<int64_t>(pos.numel(), 0),
                                      describe(out.reshape({-1})), to_vec(pos), false, core()));
    }
    return p;
  });
}

}  // namespace

void register_library_timings() {
  register_reductions();
  register_matmul();
  register_normalizations();
  register_indexing();
  register_losses();
}

}  // namespace neuronsim::backend
