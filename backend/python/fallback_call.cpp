#include "python/fallback_call.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include "aten/cpu_fallback.h"

namespace neuronsim::backend {

void bind_fallback_call(pybind11::module& m) {
  m.def(
      "_cpu_fallback_call",
      [](const std::string& name, const std::string& overload, pybind11::args args,
         pybind11::kwargs kwargs) {
        const auto op =
            c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
        torch::jit::Stack stack = torch::jit::createStackForSchema(
            op.schema(), torch::jit::tuple_slice(std::move(args)), kwargs, std::nullopt);
        {
          pybind11::gil_scoped_release no_gil;
          neuron_cpu_fallback(op, &stack);
        }
        return torch::jit::createPyObjectForStack(std::move(stack));
      },
      "Runs the ATen op `name`.`overload` through the neuron CPU fallback.");
}

}  // namespace neuronsim::backend
