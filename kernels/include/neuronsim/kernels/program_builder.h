#pragma once
// Builds a Program with producer/consumer synchronisation by name instead of by semaphore
// arithmetic: each stream owns one semaphore and counts its signals, so "wait until the vector
// engine has passed mark 7" is a token. Redundant waits are dropped.
#include <map>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::kernels {

using device_model::StreamId;

inline constexpr StreamId kTensor{device_model::EngineKind::kTensor, 0};
inline constexpr StreamId kVector{device_model::EngineKind::kVector, 0};
inline constexpr StreamId kScalar{device_model::EngineKind::kScalar, 0};
inline constexpr StreamId kGpSimd{device_model::EngineKind::kGpSimd, 0};
inline StreamId dma_queue(uint8_t q) {
  return {device_model::EngineKind::kDma, q};
}

class ProgramBuilder {
 public:
  struct Token {
    uint16_t sem = 0;
    int32_t value = 0;  // 0: nothing to wait for
  };

  explicit ProgramBuilder(std::string name, const device_model::CoreParams& core);

  /// Appends a data instruction.
  void emit(StreamId s, const device_model::Instruction& in);
  /// Signals `s`'s semaphore after its preceding work; returns the token consumers wait on.
  Token mark(StreamId s);
  /// Makes `s` wait for a token (no-op when already covered).
  void wait(StreamId s, Token t);

  /// Bump allocators over SBUF (bytes per partition) and PSUM banks; throw when full.
  uint64_t alloc_sbuf(uint64_t bytes_per_partition, uint64_t align = 64);
  uint64_t alloc_psum_bank();
  void add_hbm_region(const std::string& name, uint64_t offset, uint64_t bytes);

  device_model::Program build() &&;

 private:
  uint16_t sem_of(StreamId s) const;
  device_model::Program program_;
  const device_model::CoreParams& core_;
  std::map<uint16_t, int32_t> signals_;
  std::map<std::pair<std::string, uint16_t>, int32_t> waited_;
  uint64_t sbuf_next_ = 0;
  uint32_t psum_next_ = 0;
};

}  // namespace neuronsim::kernels
