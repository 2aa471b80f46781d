#pragma once
// SBUF slots holding K-chunks of one matmul operand, replaced by Belady's rule over the kernel's
// known sequence of steps: a missing chunk goes into a free slot, else into the slot whose chunk
// is needed again farthest in the future (never again first; ties: the one released earliest).
// With room for a whole block this keeps a resident operand in SBUF and rolls it into the next
// block as the last pass over the old one releases its slots; with a few slots it is a ring.
#include <cstdint>
#include <optional>
#include <vector>

#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

class ChunkCache {
 public:
  using Token = ProgramBuilder::Token;
  /// keys[i]: the chunk step i reads (ids >= 0).
  ChunkCache(uint32_t slots, const std::vector<int>& keys);

  struct Slot {
    int key = -1;
    int last_use = -1;  // step that last read the slot; -1 while its chunk waits for first use
    Token release;      // TensorE's mark after last_use: the slot may be overwritten after it
    Token ready[2];     // the chunk is in the slot after these (DMA queue or copy engines)
  };

  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  Slot& slot(uint32_t s) { return slots_[s]; }
  std::optional<uint32_t> find(int key) const;
  /// A slot step j's chunk may be loaded into while steps < emitted are all emitted, or none
  /// (every slot is still needed before j, or released by a step not emitted yet).
  std::optional<uint32_t> victim(int j, int emitted) const;
  /// Gives slot s to step j's chunk.
  void fill(uint32_t s, int j);
  /// Step j read slot s; TensorE's mark `release` follows it.
  void used(uint32_t s, int j, Token release);

 private:
  int next_use(const Slot& s) const;
  std::vector<Slot> slots_;
  const std::vector<int>& keys_;
  std::vector<int> next_;  // next_[i]: the next step reading keys_[i], or INT32_MAX
};

}  // namespace neuronsim::kernels
