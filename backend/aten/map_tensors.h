#pragma once
// Rebuilding a boxed argument with each of its tensors replaced (CPU copies for the fallback,
// meta tensors for shape inference).
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>

namespace neuronsim::backend {

/// `v` with every tensor inside it (a tensor, a tensor list, or the tensors of a generic list,
/// which becomes an optional-tensor list) replaced by fn(tensor); other values unchanged.
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(fn(t));
    return out;
  }
  if (v.isList()) {
    const auto& ref = v.toListRef();
    bool has_tensor = false;
    for (const auto& e : ref) has_tensor |= e.isTensor();
    if (!has_tensor) return v;
    c10::List<std::optional<at::Tensor>> out;
    for (const auto& e : ref) {
      if (e.isTensor())
        out.push_back(fn(e.toTensor()));
      else
        out.push_back(std::nullopt);
    }
    return out;
  }
  return v;
}

}  // namespace neuronsim::backend
