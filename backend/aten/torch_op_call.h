#pragma once
// The op library's view of one PyTorch call (kernels/ops/op_call.h) over a boxed kernel's
// arguments: the only place eager arguments are read into the library's terms.
#include <ATen/core/Tensor.h>

#include "aten/native_ops.h"
#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::backend {

/// The framework element type of a torch dtype.
kernels::ops::ScalarType scalar_type_of(c10::ScalarType t);

/// A tensor as the op library sees it (its device description when it is on the device and the
/// HBM resolver is given).
kernels::ops::TensorArg tensor_arg(const at::Tensor& t, const HbmAddressOf& hbm_address);

class TorchOpCall final : public kernels::ops::OpCall {
 public:
  explicit TorchOpCall(const OpInvocation& inv) : inv_(inv) {}

  const std::string& name() const override { return inv_.name; }
  size_t num_args() const override { return inv_.args.size(); }
  kernels::ops::ArgKind kind(std::string_view arg) const override;
  kernels::ops::TensorArg tensor(std::string_view arg) const override;
  kernels::ops::TensorArg tensor(size_t index) const override;
  std::vector<kernels::ops::TensorArg> tensors(std::string_view arg) const override;
  double number(std::string_view arg, double fallback) const override;
  int64_t integer(std::string_view arg, int64_t fallback) const override;
  std::vector<double> numbers(std::string_view arg) const override;
  std::vector<int64_t> ints(std::string_view arg) const override;
  std::string str(std::string_view arg) const override;
  std::optional<kernels::ops::ScalarType> scalar_type(std::string_view arg) const override;
  size_t num_outputs() const override { return inv_.outputs.size(); }
  kernels::ops::TensorArg output(size_t i) const override;
  kernels::ops::TensorArg count() const override;
  const device_model::CoreParams& core() const override;
  uint32_t grid() const override { return inv_.grid; }

 private:
  const c10::IValue* find(std::string_view arg) const;
  kernels::ops::TensorArg arg_of(const at::Tensor& t) const;

  const OpInvocation& inv_;
};

}  // namespace neuronsim::backend
