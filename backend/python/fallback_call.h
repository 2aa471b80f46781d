#pragma once
// neuronsim._C._cpu_fallback_call: runs an ATen op through the CPU fallback whatever its
// registration (tests sweep the fallback's write-back over every mutating schema with it).
#include <torch/extension.h>

namespace neuronsim::backend {

void bind_fallback_call(pybind11::module& m);

}  // namespace neuronsim::backend
