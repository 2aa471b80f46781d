#pragma once
#include <pybind11/pybind11.h>

namespace neuronsim::backend::distributed {
/// Adds the distributed classes and functions to neuronsim._C.
void register_bindings(pybind11::module_& m);
}  // namespace neuronsim::backend::distributed
