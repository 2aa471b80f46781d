#pragma once
// The CPU fallback: an op without a native kernel runs ATen's CPU kernel on host copies of its
// device arguments (through the simulated host link), and exactly the arguments it writes are
// copied back, as PyTorch's own cpu_fallback does. On top of PyTorch's:
// - arguments that share device memory share host memory, so the CPU kernel sees the aliasing
//   it would see on the CPU (x.add_(x[::-1]), out= aliasing an input);
// - writes the schema does not annotate are copied back too (native_batch_norm's running
//   statistics), from a table;
// - a dtype the device computes with but the CPU kernel lacks (integer histc, float8 math) is
//   computed in a wider CPU dtype and cast back;
// - random ops draw from the device generator's CPU stream;
// - a CPU kernel that raises leaves every argument unchanged (nothing is copied back).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace neuronsim::backend {

/// The boxed CPU fallback (counted, warned once, an error under NEURON_SIM_STRICT=1).
void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

/// The fallback's computation alone (no tracking, no warning, no host overhead): the op's CPU
/// kernel on staged host copies, written back and returned as device tensors.
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack);

/// True while the fallback runs (its internal copies are not counted as ops of their own).
bool in_fallback();

/// The wider CPU dtype the fallback computes `t` in when the CPU kernel lacks `t`; nullopt when
/// there is none (or the device does not compute with `t` either).
std::optional<c10::ScalarType> wider_host_dtype(c10::ScalarType t);

}  // namespace neuronsim::backend
