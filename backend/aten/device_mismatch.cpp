#include "aten/device_mismatch.h"

#include <c10/core/DeviceType.h>

namespace neuronsim::backend {

std::string torchneuron_device_mismatch(const c10::FunctionSchema& schema, size_t arg,
                                        int64_t element, const at::Tensor& t) {
  const c10::Argument& a = schema.arguments().at(arg);
  std::string where = a.kwarg_only() ? "kwarg '" + a.name() + "'" : "arg" + std::to_string(arg);
  if (element >= 0) where += "[" + std::to_string(element) + "]";
  return "Non-scalar tensor " + where + " is on " + c10::DeviceTypeName(t.device().type(), true) +
         " device, expected neuron: ";
}

}  // namespace neuronsim::backend
