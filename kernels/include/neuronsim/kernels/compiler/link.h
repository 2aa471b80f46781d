#pragma once
// Linking: the programs of a graph's regions become one program (one launch). Each part keeps
// its own synchronisation (its semaphore counts are shifted past the earlier parts'), runs in
// its own SBUF/PSUM window, and waits for earlier parts only where it must: before the first
// instruction that touches on-chip memory an earlier part still uses, or HBM memory an earlier
// part writes (or reads, before a write). Everything else runs ahead, so a region's loads
// overlap the previous region's compute ("DMA overlaps compute across region boundaries").
//
// Parts built by the graph compiler address HBM virtually (fusion.h: virtual_address); their
// addresses are patched in place at every launch (relocate). Parts from elsewhere (the eager
// backend's programs for nodes the compiler leaves opaque) are barriers: they start after
// everything before them and everything after them waits for them.
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels::compiler {

struct Part {
  device_model::Program program;  // its semaphores count from zero, as for a launch of its own
  std::string name;               // the trace's section name
  std::string detail;             // the graph nodes it computes
  uint64_t sbuf_base = 0;         // its SBUF window: added to every SBUF address
  uint64_t psum_base = 0;         // its PSUM window
  bool barrier = false;           // not analysable (absolute HBM addresses): fully ordered
};

/// Where a virtual HBM address sits in a linked program.
struct Relocation {
  uint32_t stream = 0;
  uint32_t instr = 0;
  uint8_t field = 0;  // 0 dst, 1 src0, 2 src1, 3 src2
  int value = -1;
  uint64_t offset = 0;  // bytes from the value's element 0
};

struct LinkedProgram {
  device_model::Program program;
  std::vector<Relocation> relocations;
};

/// `root[v]`: the value whose memory v lives in (views and in-place results share it).
LinkedProgram link(const std::string& name, std::vector<Part> parts, const std::vector<int>& root,
                   const device_model::CoreParams& core);

inline constexpr uint64_t kNoAddress = ~uint64_t{0};

/// Patches every virtual address with `address[value]` (the tensor's HBM byte address).
/// Throws std::invalid_argument naming a value with no address (kNoAddress).
void relocate(LinkedProgram& p, const std::vector<uint64_t>& address);

/// Calls fn(ap, writes) for every memory operand an instruction reads or writes.
template <typename Fn>
void for_each_operand(device_model::Instruction& in, Fn&& fn);

}  // namespace neuronsim::kernels::compiler

#include "neuronsim/kernels/compiler/link_operands.h"
