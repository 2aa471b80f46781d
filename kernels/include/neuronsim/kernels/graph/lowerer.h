#pragma once
// The builder a lowering rule writes a node's IR with (lowering.h): its arguments as graph
// values, temporaries for a composite's intermediates, and one call per IR op.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/kernels/graph/lowering.h"

namespace neuronsim::kernels::graph {

/// Raised by a lowering rule for arguments it does not handle; the node stays opaque.
struct NotLowered : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Builds one node's IR ops into a LoweredGraph: what a lowering rule (kernels/ops) writes with.
class Lowerer {
 public:
  Lowerer(LoweredGraph& out, int node_index) : out_(out), index_(node_index) {}

  const Node& node() const { return out_.graph.nodes().at(static_cast<size_t>(index_)); }
  const TensorMeta& meta(int v) const { return out_.graph.value(v).meta; }

  /// The tensor argument `name` (a device value).
  int tensor(const std::string& name) const {
    const Arg& a = node().arg(name);
    if (a.kind != Arg::Kind::kTensor) throw NotLowered(name + " is not a tensor");
    return a.value;
  }
  bool has(const std::string& name) const {
    const Arg* a = node().find(name);
    return a && !a->is_none();
  }
  double number(const std::string& name, double fallback) const {
    const Arg* a = node().find(name);
    if (!a || a->is_none()) return fallback;
    if (a->kind == Arg::Kind::kTensor) throw NotLowered(name + " is a tensor");
    return a->as_double();
  }
  std::string str(const std::string& name) const {
    const Arg* a = node().find(name);
    return a && a->kind == Arg::Kind::kString ? a->s : std::string();
  }
  int64_t dim_arg(const std::string& name, int64_t ndim) const {
    int64_t d = node().arg(name).i;
    return d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
  }

  /// The node's output `i`, or a temporary like `like` when the framework does not use it.
  int output(size_t i, const TensorMeta& like, const std::string& what) {
    const auto& outs = node().outputs;
    if (i < outs.size() && outs[i] >= 0) return outs[i];
    return temp(like, what);
  }
  int temp(const TensorMeta& m, const std::string& what) {
    TensorMeta t = m;
    t.dtype = device_model::DType::kFp32;
    t.type_name = "float32";
    t.strides = contiguous_strides(t.sizes);
    const int id = out_.graph.add_temporary(t, node().name + "." + what);
    out_.root.push_back(id);
    return id;
  }

  // ---- building one pointwise op ----
  /// Starts an expression; `operand` then adds tensors (or constants) to it.
  void begin() {
    expr_ = Expr{};
    inputs_.clear();
  }
  kernels::Arg operand(const std::string& name) {
    const Arg& a = node().arg(name);
    if (a.kind == Arg::Kind::kTensor) return value(a.value);
    if (a.is_none()) throw NotLowered(name + " is None");
    return kernels::Arg::constant(static_cast<float>(a.as_double()));
  }
  kernels::Arg value(int v) {
    if (!meta(v).fusable()) throw NotLowered("operand " + meta(v).to_string() + " is not fusable");
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i] == v) return kernels::Arg::input(static_cast<int>(i));
    }
    inputs_.push_back(v);
    return kernels::Arg::input(static_cast<int>(inputs_.size()) - 1);
  }
  Expr& e() { return expr_; }
  /// Finishes the expression as op producing `output`.
  void pointwise(int output) {
    if (!meta(output).fusable()) {
      throw NotLowered("result " + meta(output).to_string() + " is not fusable");
    }
    if (expr_.steps.empty()) {
      // A bare operand (clone, cast): copy it.
      throw std::logic_error("pointwise without steps");
    }
    Op op;
    op.kind = Op::Kind::kPointwise;
    op.node = index_;
    op.inputs = inputs_;
    op.output = output;
    op.expr = expr_;
    out_.ops.push_back(std::move(op));
  }
  /// output = a (a copy, possibly broadcasting or casting).
  void copy(int output, kernels::Arg a) {
    if (a.kind == kernels::Arg::kImm) {
      expr_.alu(device_model::AluOp::kBypass, a, kernels::Arg::constant(0));
    } else if (meta(output).is_bool()) {
      expr_.alu(device_model::AluOp::kNotEqual, a, kernels::Arg::constant(0));
    } else {
      expr_.alu(device_model::AluOp::kBypass, a, kernels::Arg::constant(0));
    }
    pointwise(output);
  }

  void reduce(int in, int output, device_model::ReduceOp r, std::vector<int64_t> dims, float scale,
              bool nonzero = false) {
    if (!meta(in).fusable() || !meta(output).fusable()) throw NotLowered("reduction of non-float");
    Op op;
    op.kind = Op::Kind::kReduce;
    op.node = index_;
    op.inputs = {in};
    op.output = output;
    op.reduce = r;
    std::sort(dims.begin(), dims.end());
    op.dims = std::move(dims);
    op.scale = scale;
    op.nonzero = nonzero;
    out_.ops.push_back(std::move(op));
  }
  void matmul(int a, int b, int output) {
    if (!meta(a).fusable() || !meta(b).fusable() || meta(a).is_bool()) {
      throw NotLowered("matmul of non-float data");
    }
    Op op;
    op.kind = Op::Kind::kMatmul;
    op.node = index_;
    op.inputs = {a, b};
    op.output = output;
    out_.ops.push_back(std::move(op));
  }
  void attention(std::vector<int> inputs, int output, float scale, bool causal) {
    Op op;
    op.kind = Op::Kind::kAttention;
    op.node = index_;
    op.inputs = std::move(inputs);
    op.output = output;
    op.scale = scale;
    op.causal = causal;
    out_.ops.push_back(std::move(op));
  }
  void view(int in, int output, int root_of) {
    Op op;
    op.kind = Op::Kind::kView;
    op.node = index_;
    op.inputs = {in};
    op.output = output;
    out_.ops.push_back(std::move(op));
    out_.root.at(static_cast<size_t>(output)) = out_.root.at(static_cast<size_t>(root_of));
  }

  /// A meta like `m` with dim `d` of size 1 (a keepdim reduction result).
  static TensorMeta keep(const TensorMeta& m, int64_t d) {
    TensorMeta r = m;
    r.sizes.at(static_cast<size_t>(d)) = 1;
    return r;
  }

 private:
  LoweredGraph& out_;
  int index_;
  Expr expr_;
  std::vector<int> inputs_;
};

}  // namespace neuronsim::kernels::graph
