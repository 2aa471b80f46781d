#pragma once
// The trace's names for a core's process and rows (a logical core of several physical cores is
// one process; its physical cores' rows carry a prefix).
#include <cstdint>
#include <string>

namespace neuronsim::device_model {

/// Trace process of physical core `core` on a chip of logical core size `lnc`: "nc<first physical
/// core of its logical core>".
std::string core_trace_process(uint32_t core, uint32_t lnc);
/// Prefix of its trace rows: "pcore<p> " for physical core p >= 1 of a logical core; "" for
/// pcore 0, whose rows keep the names of a grid-1 core ("TensorE", "DMA q0", "Kernels").
std::string core_trace_row_prefix(uint32_t core, uint32_t lnc);

}  // namespace neuronsim::device_model
