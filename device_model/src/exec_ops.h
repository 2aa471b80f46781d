#pragma once
// The function of each opcode (executor.cpp dispatches to these); instructions are validated.
#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/memory.h"

namespace neuronsim::device_model::exec {

// TensorE (exec_tensor_engine.cpp).
void exec_matmul(const Instruction& in, const MemoryMap& mem);
void exec_transpose(const Instruction& in, const MemoryMap& mem);
// Elementwise arithmetic (exec_elementwise.cpp).
void exec_activation(const Instruction& in, const MemoryMap& mem);
void exec_tensor_tensor(const Instruction& in, const MemoryMap& mem);
void exec_tensor_scalar(const Instruction& in, const MemoryMap& mem);
void exec_select(const Instruction& in, const MemoryMap& mem);
// Reductions along the free axis (exec_reduce.cpp).
void exec_tensor_reduce(const Instruction& in, const MemoryMap& mem);
// Generated data (exec_generate.cpp).
void exec_iota(const Instruction& in, const MemoryMap& mem);
void exec_rng(const Instruction& in, const MemoryMap& mem);
void exec_memset(const Instruction& in, const MemoryMap& mem);
// Data movement with dtype conversion (exec_copy.cpp). `int_exact`: integer to integer exact
// (tensor_copy); DMA casts always go through fp32.
void exec_copy(const AccessPattern& dst, const AccessPattern& src, const MemoryMap& mem,
               bool int_exact);
void exec_tensor_copy(const Instruction& in, const MemoryMap& mem);
void exec_dma(const Instruction& in, const MemoryMap& mem);

}  // namespace neuronsim::device_model::exec
