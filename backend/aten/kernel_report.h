#pragma once
// What a backend kernel reports about the op it ran, natively or on the CPU fallback: counted on
// the ATen ops open on the calling thread (op_observer.h), or recorded in the tracker
// (op_tracking.h) under the kernel's own name when none is open (a kernel called directly).
#include <ATen/core/operator_name.h>

#include <string>

namespace neuronsim::backend {

/// A backend kernel computed `op` natively (`computed_at_32_bits`: 64-bit data at 32 bits).
void report_native_kernel(const c10::OperatorName& op, bool computed_at_32_bits);
/// A backend kernel sent `op` to the CPU fallback: every op open on this thread becomes a
/// fallback; then NEURON_SIM_STRICT=1 (and TorchNeuron's switch) refuse it, or it warns once.
void report_fallback_kernel(const std::string& op, const std::string& reason);

}  // namespace neuronsim::backend
