#pragma once
// The engines of a NeuronCore, in one table: what a core elaborates, what programs call their
// streams, what statistics and traces call their rows, in the order reports list them. Every
// consumer reads it (the core, program parsing, trace summaries; Python through the extension),
// so adding an engine is a row here plus the engine's own files (its model and its cost).
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace neuronsim::device_model {

enum class EngineKind : uint8_t { kTensor, kVector, kScalar, kGpSimd, kDma };

struct EngineInfo {
  EngineKind kind;
  /// Program stream and statistics name: "tensor" ("nc0.tensor.busy_ps"); DMA queues add their
  /// index ("dma3").
  std::string_view stream;
  /// Trace row (as the Neuron profiler names it): "TensorE"; DMA queues are "DMA q<N>".
  std::string_view row;
  /// A second row of the same engine (TensorE's background LoadStationary unit), or empty. Not
  /// an engine of its own: it is listed beside its engine but never the bottleneck.
  std::string_view unit_row;
  /// A compute engine runs one instruction stream; the DMA is a set of queues.
  bool compute;
};

inline constexpr std::array<EngineInfo, 5> kEngines = {{
    {EngineKind::kTensor, "tensor", "TensorE", "TensorE (LoadStationary)", true},
    {EngineKind::kVector, "vector", "VectorE", "", true},
    {EngineKind::kScalar, "scalar", "ScalarE", "", true},
    {EngineKind::kGpSimd, "gpsimd", "GpSimdE", "", true},
    {EngineKind::kDma, "dma", "DMA", "", false},
}};

/// A DMA queue's trace row is this prefix and its index ("DMA q3").
inline constexpr std::string_view kDmaQueueRowPrefix = "DMA q";
/// A core's DMA queues taken together (a summary row, the union of the queues' rows).
inline constexpr std::string_view kAllDmaRow = "DMA (all queues)";

inline constexpr int kComputeEngineCount = [] {
  int n = 0;
  for (const EngineInfo& e : kEngines) n += e.compute ? 1 : 0;
  return n;
}();

constexpr const EngineInfo& engine_info(EngineKind k) {
  for (const EngineInfo& e : kEngines) {
    if (e.kind == k) return e;
  }
  return kEngines.back();
}

/// The engine whose stream name is `stream` (without a DMA queue index).
constexpr std::optional<EngineKind> engine_of_stream(std::string_view stream) {
  for (const EngineInfo& e : kEngines) {
    if (e.stream == stream) return e.kind;
  }
  return std::nullopt;
}

/// The compute engine whose trace row is `row` ("TensorE"), if any.
constexpr const EngineInfo* compute_engine_of_row(std::string_view row) {
  for (const EngineInfo& e : kEngines) {
    if (e.compute && e.row == row) return &e;
  }
  return nullptr;
}

}  // namespace neuronsim::device_model
