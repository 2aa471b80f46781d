#pragma once
// Typed, const parameter structs read from a Config. Each field names its preset key; parsing
// checks ranges and names the offending key. Models keep these by value and never change them.
#include <cstdint>
#include <string>

#include "neuronsim/device_model/config.h"

namespace neuronsim::device_model {

enum class TensorTimingMode { kNeuronCore, kScaleSim };

struct TensorEngineParams {
  double frequency_hz;               // tensor.frequency_ghz
  uint32_t rows;                     // tensor.rows: PE rows = max contraction per matmul
  uint32_t columns;                  // tensor.columns: PE columns = max stationary free size
  uint32_t moving_free_max;          // tensor.moving_free_max
  uint32_t mm_min_ii_cycles;         // tensor.mm_min_ii_cycles: MM_INIT_LATENCY
  double fp32_cost_factor;           // tensor.fp32_cost_factor
  double fp8_cost_factor;            // tensor.fp8_cost_factor
  double load_stationary_speedup;    // tensor.load_stationary_speedup
  uint32_t pipeline_latency_cycles;  // tensor.pipeline_latency_cycles
  uint32_t transpose_min_cycles;     // tensor.transpose_min_cycles
  TensorTimingMode timing_mode;      // tensor.timing_mode
  // tensor.fp8_double_row_cost_factor: a double-row FP8 matmul's time relative to a BF16 one
  // of the same stationary/moving sizes (it contracts twice the rows); 0: no double-row mode.
  double fp8_double_row_cost_factor;
};

/// Shared by VectorE, ScalarE and GpSimdE.
struct LaneEngineParams {
  double frequency_hz;
  uint32_t lanes;
  uint32_t min_ii_cycles;            // <engine>.min_ii_cycles (GpSimd: start_cycles is separate)
  uint32_t pipeline_latency_cycles;  // extra latency a dependent instruction waits for
  // VectorE only.
  uint32_t max_free_elements_sbuf = 0;
  uint32_t max_free_elements_psum = 0;
  double perf_mode_copy_speedup = 1.0;
  double perf_mode_partial_speedup = 1.0;
  double perf_mode_tensor_tensor_speedup = 1.0;
  // ScalarE only.
  uint32_t accumulate_cycles = 0;
  // GpSimdE only.
  uint32_t start_cycles = 0;
};

struct SbufParams {
  uint32_t partitions;
  uint64_t partition_bytes;
  uint32_t stride_penalty_threshold_bytes;
  double stride_penalty_factor;
};

struct PsumParams {
  uint32_t partitions;
  uint64_t partition_bytes;
  uint32_t banks;
  uint64_t bank_bytes() const { return partition_bytes / banks; }
};

struct DmaParams {
  uint32_t engines;
  uint32_t queues;
  double engine_bandwidth_bytes_per_s;  // dma.engine_bandwidth_gbps
  uint32_t partitions_per_engine;
  uint32_t packet_bytes;          // dma.packet_bytes: descriptors are processed in packets
  double descriptor_overhead_ns;  // per packet
  double launch_latency_ns;
  // Element-granular transfers (a tensor stored transposed): DMA transpose into SBUF at this
  // fraction of the engines' rate (0: not supported), else strided descriptors, one per
  // partition row, each element costing one access of strided_access_bytes.
  double transpose_efficiency_hbm;   // dma.transpose_efficiency_hbm (HBM -> SBUF)
  double transpose_efficiency_sbuf;  // dma.transpose_efficiency_sbuf (SBUF -> SBUF)
  uint32_t strided_access_bytes;     // dma.strided_access_bytes
};

struct HbmParams {
  uint64_t capacity_bytes;       // per stack
  double bandwidth_bytes_per_s;  // per stack
  double latency_ns;
};

struct HostParams {
  double bandwidth_bytes_per_s;
  double latency_ns;
  double kernel_launch_overhead_ns;
  double cpu_fallback_overhead_ns;
};

/// Everything one NeuronCore needs.
struct CoreParams {
  TensorEngineParams tensor;
  LaneEngineParams vector, scalar, gpsimd;
  SbufParams sbuf;
  PsumParams psum;
  DmaParams dma;
  uint32_t semaphores;
};

/// A chip (or the part of an instance neuronsim elaborates): cores sharing HBM stacks.
struct ChipParams {
  std::string preset_name;
  std::string instance_name;
  uint32_t chips;
  uint32_t cores_per_chip;
  uint32_t hbm_stacks_per_chip;
  uint32_t logical_core_size;
  HbmParams hbm;
  HostParams host;
  CoreParams core;

  uint32_t cores_per_stack() const { return cores_per_chip / hbm_stacks_per_chip; }
  /// Peak TensorE throughput of one core for 16-bit inputs, FLOP/s (2 x PEs x clock, SCHEMA).
  double tensor_peak_flops() const {
    return 2.0 * core.tensor.rows * core.tensor.columns * core.tensor.frequency_hz;
  }
};

ChipParams parse_chip_params(const Config& config);

}  // namespace neuronsim::device_model
