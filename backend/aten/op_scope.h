#pragma once
// Marks an ATen op on the whole-program trace (when one is recording): its host range, and the
// device span of the kernels it launches. Costs one branch when no trace is recording.
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>

namespace neuronsim::backend {

class OpScope {
 public:
  /// `args`: the op's arguments (shapes and dtypes are recorded).
  OpScope(const std::string& name, c10::ArrayRef<c10::IValue> args);
  OpScope(const std::string& name, std::initializer_list<at::Tensor> tensors);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace neuronsim::backend
