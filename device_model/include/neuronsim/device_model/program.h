#pragma once
// A Program is what one kernel launch gives one NeuronCore: an instruction stream per engine and
// per DMA queue, synchronised through the core's semaphores (reset to zero at launch).
//
// On a logical NeuronCore of several physical cores (trn2 LNC=2) a launch may span the pair: a
// program with `grid` 2 holds the streams of both program instances, each stream tagged with the
// physical core (pcore, NKI's nl.program_id()) that runs it. See Note [LNC launch] in device.h.
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/device_model/isa.h"

namespace neuronsim::device_model {

struct StreamId {
  EngineKind engine = EngineKind::kTensor;
  uint8_t queue = 0;  // DMA queue index; 0 for compute engines
  uint8_t pcore = 0;  // program instance (physical core of the logical core); < Program::grid
  bool operator==(const StreamId&) const = default;
  /// "tensor", "vector", "scalar", "gpsimd", "dma3"; "pcore1.tensor" for program instance 1
  std::string name() const;
  /// Trace row: "TensorE", ..., "DMA q3" (without the pcore; the trace row carries it)
  std::string display_name() const;
};
/// Parses a stream name as written by StreamId::name().
std::optional<StreamId> parse_stream_id(std::string_view name);

struct Stream {
  StreamId id;
  std::vector<Instruction> instructions;
  /// (first instruction, section): instructions from there on belong to Program::sections[section]
  /// until the next mark. Increasing; empty when the program has no sections.
  std::vector<std::pair<uint32_t, uint32_t>> section_marks;
  /// Per instruction: index into Program::sources (the kernel source line it came from), or
  /// kNoSource. Empty when the program carries no source lines (kernel-library programs).
  std::vector<uint32_t> sources;
};

inline constexpr uint32_t kNoSource = 0xFFFFFFFFu;

/// A named part of a program, e.g. one fused region of a compiled graph linked into a single
/// launch: the trace shows each as a kernel slice of its own inside the program's slice.
struct ProgramSection {
  std::string name;
  std::string detail;  // shown with the slice (the graph nodes it computes)
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
  std::vector<ProgramSection> sections;
  /// Source locations of the kernel the program was traced from ("kernel.py:12"): instruction
  /// slices in the trace carry theirs (arg "src"). Empty for kernel-library programs.
  std::vector<std::string> sources;
  /// Program instances (physical cores) of the launch: 1, or up to the chip's logical core size.
  uint32_t grid = 1;

  size_t instruction_count() const;
  /// The stream for `id`, created empty on first use.
  Stream& stream(StreamId id);
  /// Instructions of program instance `pcore`.
  size_t instruction_count(uint32_t pcore) const;
};

}  // namespace neuronsim::device_model
