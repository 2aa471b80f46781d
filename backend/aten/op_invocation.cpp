// OpInvocation's argument lookup by schema name.
#include <c10/util/Exception.h>

#include "aten/native_ops.h"

namespace neuronsim::backend {

at::Tensor OpInvocation::tensor(size_t i) const {
  return i < args.size() && args[i].isTensor() ? args[i].toTensor() : at::Tensor();
}

bool OpInvocation::has_arg(const std::string& n) const {
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    if (schema->arguments()[i].name() == n) return true;
  }
  return false;
}

const c10::IValue& OpInvocation::arg(const std::string& n) const {
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    if (schema->arguments()[i].name() == n) return args.at(i);
  }
  TORCH_CHECK(false, "neuronsim: ", name, " has no argument '", n, "'");
}

double OpInvocation::scalar(const std::string& n, double fallback) const {
  if (!has_arg(n)) return fallback;
  const c10::IValue& v = arg(n);
  if (v.isScalar()) return v.toScalar().toDouble();
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  return fallback;
}

std::vector<int64_t> OpInvocation::ints(const std::string& n) const {
  const c10::IValue& v = arg(n);
  if (v.isIntList()) return v.toIntVector();
  std::vector<int64_t> out;
  for (const c10::IValue& e : v.toListRef()) {
    out.push_back(e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__));
  }
  return out;
}

}  // namespace neuronsim::backend
