#pragma once
// neuronsim._C's NKI entry points: a traced kernel (python/neuronsim/nki) is lowered by
// kernels/nki and launched through the runtime; HBM tensors for its numpy arguments.
#include <torch/extension.h>

namespace neuronsim::backend {

void bind_nki(pybind11::module_& m);

}  // namespace neuronsim::backend
