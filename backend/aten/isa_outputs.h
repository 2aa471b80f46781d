#pragma once
// ISA mode's outputs: what a native op's programs write starts as poison, so a value the
// programs did not compute cannot pass for one. The outputs are sized by the op's Meta kernel
// (no values computed on the host); ops it cannot size are listed in docs/design.md.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

namespace neuronsim::backend {

/// Fills a device tensor with poison: NaN for floating types, 0xA5 in every byte otherwise.
void poison(const at::Tensor& t);

/// An out= tensor that is also read as an input (`_safe_softmax` calls where(c, 0, out, out=out)):
/// it must not be poisoned. `args`: the op's arguments as passed.
bool reads_out(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
               const at::Tensor& out);

/// Runs `op`'s Meta kernel on meta copies of the device arguments on `stack` and leaves device
/// returns in their place: in-place results are their device arguments, out= arguments are
/// resized and poisoned, fresh outputs are allocated and poisoned. Returns false with the stack
/// untouched when the Meta kernel cannot size the outputs (none registered, data-dependent
/// sizes), a result is a view of an argument, or an output is 64-bit (host values, as
/// native_boxed.h says).
bool isa_outputs_from_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace neuronsim::backend
