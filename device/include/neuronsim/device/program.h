#pragma once
// A Program is what one kernel launch gives one NeuronCore: an instruction stream per engine and
// per DMA queue, synchronised through the core's semaphores (reset to zero at launch).
#include <string>
#include <vector>

#include "neuronsim/device/isa.h"

namespace neuronsim::device {

struct StreamId {
  EngineKind engine = EngineKind::kTensor;
  uint8_t queue = 0;  // DMA queue index; 0 for compute engines
  bool operator==(const StreamId&) const = default;
  /// "tensor", "vector", "scalar", "gpsimd", "dma3"
  std::string name() const;
  /// Trace row: "TensorE", ..., "DMA q3"
  std::string display_name() const;
};
/// Parses a stream name as written by StreamId::name().
std::optional<StreamId> parse_stream_id(std::string_view name);

struct Stream {
  StreamId id;
  std::vector<Instruction> instructions;
};

/// A named HBM range the program may touch (checked by the validator when any are declared).
struct HbmRegion {
  std::string name;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct Program {
  std::string name;
  std::vector<Stream> streams;
  std::vector<HbmRegion> hbm_regions;

  size_t instruction_count() const;
  /// The stream for `id`, created empty on first use.
  Stream& stream(StreamId id);
};

}  // namespace neuronsim::device
