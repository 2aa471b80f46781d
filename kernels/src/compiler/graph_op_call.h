#pragma once
// One node of a graph as an op-library call (ops/op_call.h): the compiler builds an op's eager
// programs at compile time for nodes that have no fused rule, addressing the node's values
// virtually (fusion.h: virtual_address) so the linker relocates them like any fused region.
#include "neuronsim/kernels/compiler/graph_ir.h"
#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::kernels::compiler {

class GraphOpCall final : public ops::OpCall {
 public:
  GraphOpCall(const Graph& g, const Node& node, const device_model::CoreParams& core)
      : g_(g), node_(node), core_(core) {}

  const std::string& name() const override { return node_.op; }
  size_t num_args() const override { return node_.args.size(); }
  ops::ArgKind kind(std::string_view arg) const override;
  ops::TensorArg tensor(std::string_view arg) const override;
  ops::TensorArg tensor(size_t index) const override;
  std::vector<ops::TensorArg> tensors(std::string_view arg) const override;
  double number(std::string_view arg, double fallback) const override;
  int64_t integer(std::string_view arg, int64_t fallback) const override;
  std::vector<double> numbers(std::string_view arg) const override;
  std::vector<int64_t> ints(std::string_view arg) const override;
  std::string str(std::string_view arg) const override;
  std::optional<ops::ScalarType> scalar_type(std::string_view arg) const override;
  size_t num_outputs() const override { return node_.outputs.size(); }
  ops::TensorArg output(size_t i) const override;
  /// Throws std::invalid_argument: an output size known only from the data does not compile.
  ops::TensorArg count() const override;
  const device_model::CoreParams& core() const override { return core_; }
  uint32_t grid() const override { return 1; }

 private:
  const Arg* find(std::string_view arg) const;
  ops::TensorArg value(int v) const;

  const Graph& g_;
  const Node& node_;
  const device_model::CoreParams& core_;
};

}  // namespace neuronsim::kernels::compiler
