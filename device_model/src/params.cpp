#include "neuronsim/device_model/params.h"

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"

namespace neuronsim::device_model {
namespace {

// Reads with range checks; every failure names the key.
class Reader {
 public:
  explicit Reader(const Config& c) : c_(c) {}

  double positive(const std::string& key) const {
    double v = c_.number(key);
    if (!(v > 0))
      throw ConfigError(fmt::format("configuration key '{}' must be > 0, got {}", key, v));
    return v;
  }
  double non_negative(const std::string& key) const {
    double v = c_.number(key);
    if (!(v >= 0)) {
      throw ConfigError(fmt::format("configuration key '{}' must be >= 0, got {}", key, v));
    }
    return v;
  }
  double fraction(const std::string& key) const {
    double v = c_.number(key);
    if (!(v >= 0 && v <= 1)) {
      throw ConfigError(fmt::format("configuration key '{}' must be in [0, 1], got {}", key, v));
    }
    return v;
  }
  uint32_t count(const std::string& key, int64_t lo, int64_t hi) const {
    int64_t v = c_.integer(key);
    if (v < lo || v > hi) {
      throw ConfigError(
          fmt::format("configuration key '{}' must be in [{}, {}], got {}", key, lo, hi, v));
    }
    return static_cast<uint32_t>(v);
  }
  const Config& config() const { return c_; }

 private:
  const Config& c_;
};

LaneEngineParams lane_engine(const Reader& r, const std::string& e) {
  LaneEngineParams p;
  p.frequency_hz = r.positive(e + ".frequency_ghz") * 1e9;
  p.lanes = r.count(e + ".lanes", 1, 1024);
  if (e != "gpsimd")
    p.min_ii_cycles = r.count(e + ".min_ii_cycles", 0, 1 << 20);
  else
    p.min_ii_cycles = 0;
  p.pipeline_latency_cycles = r.count(e + ".pipeline_latency_cycles", 0, 1 << 20);
  return p;
}

}  // namespace

ChipParams parse_chip_params(const Config& config) {
  Reader r(config);
  ChipParams chip;
  chip.preset_name = config.name();
  chip.instance_name = config.string("instance.name");
  chip.chips = r.count("instance.chips", 1, 1024);
  chip.cores_per_chip = r.count("chip.cores", 1, 64);
  chip.hbm_stacks_per_chip = r.count("chip.hbm_stacks", 1, 64);
  if (chip.cores_per_chip % chip.hbm_stacks_per_chip != 0) {
    throw ConfigError(
        fmt::format("configuration key 'chip.cores' ({}) must be a multiple of "
                    "'chip.hbm_stacks' ({})",
                    chip.cores_per_chip, chip.hbm_stacks_per_chip));
  }
  chip.logical_core_size = r.count("chip.logical_core_size", 1, 8);
  if (chip.cores_per_chip % chip.logical_core_size != 0) {
    throw ConfigError("configuration key 'chip.logical_core_size' must divide 'chip.cores'");
  }

  const double capacity_gib = r.positive("hbm.capacity_gib");
  if (capacity_gib > 4096)
    throw ConfigError("configuration key 'hbm.capacity_gib' must be <= 4096");
  chip.hbm.capacity_bytes = static_cast<uint64_t>(capacity_gib * (1ull << 30));
  // Positive is not enough: a capacity that truncates to 0 bytes cannot be mapped or indexed.
  if (chip.hbm.capacity_bytes < (1ull << 20)) {
    throw ConfigError(
        fmt::format("configuration key 'hbm.capacity_gib' must be >= 1 MiB "
                    "(1/1024), got {}",
                    capacity_gib));
  }
  chip.hbm.bandwidth_bytes_per_s = r.positive("hbm.bandwidth_gbps") * 1e9;
  chip.hbm.latency_ns = r.non_negative("hbm.latency_ns");

  chip.host.bandwidth_bytes_per_s = r.positive("host.bandwidth_gbps") * 1e9;
  chip.host.latency_ns = r.non_negative("host.latency_ns");
  chip.host.kernel_launch_overhead_ns = r.non_negative("host.kernel_launch_overhead_ns");
  chip.host.cpu_fallback_overhead_ns = r.non_negative("host.cpu_fallback_overhead_ns");

  CoreParams& c = chip.core;
  c.sbuf.partitions = r.count("sbuf.partitions", 1, 1024);
  c.sbuf.partition_bytes = r.count("sbuf.partition_bytes", 1024, 1 << 24);
  c.sbuf.stride_penalty_threshold_bytes =
      r.count("sbuf.stride_penalty_threshold_bytes", 1, 1 << 20);
  c.sbuf.stride_penalty_factor = r.positive("sbuf.stride_penalty_factor");
  c.psum.partitions = r.count("psum.partitions", 1, 1024);
  c.psum.partition_bytes = r.count("psum.partition_bytes", 64, 1 << 24);
  c.psum.banks = r.count("psum.banks", 1, 64);
  if (c.psum.partition_bytes % c.psum.banks != 0) {
    throw ConfigError("configuration key 'psum.banks' must divide 'psum.partition_bytes'");
  }
  c.semaphores = r.count("semaphores.count", 1, 4096);

  TensorEngineParams& t = c.tensor;
  t.frequency_hz = r.positive("tensor.frequency_ghz") * 1e9;
  t.rows = r.count("tensor.rows", 1, 1024);
  t.columns = r.count("tensor.columns", 1, 1024);
  t.moving_free_max = r.count("tensor.moving_free_max", 1, 1 << 16);
  t.mm_min_ii_cycles = r.count("tensor.mm_min_ii_cycles", 0, 1 << 20);
  t.fp32_cost_factor = r.positive("tensor.fp32_cost_factor");
  t.fp8_cost_factor = r.positive("tensor.fp8_cost_factor");
  t.fp8_double_row_cost_factor = r.non_negative("tensor.fp8_double_row_cost_factor");
  t.load_stationary_speedup = r.positive("tensor.load_stationary_speedup");
  t.pipeline_latency_cycles = r.count("tensor.pipeline_latency_cycles", 0, 1 << 20);
  t.transpose_min_cycles = r.count("tensor.transpose_min_cycles", 0, 1 << 20);
  const std::string mode = config.string("tensor.timing_mode");
  if (mode == "neuroncore")
    t.timing_mode = TensorTimingMode::kNeuronCore;
  else if (mode == "scalesim")
    t.timing_mode = TensorTimingMode::kScaleSim;
  else {
    throw ConfigError(fmt::format(
        "configuration key 'tensor.timing_mode' must be 'neuroncore' or 'scalesim', got '{}'",
        mode));
  }
  if (t.rows > c.sbuf.partitions) {
    throw ConfigError("configuration key 'tensor.rows' cannot exceed 'sbuf.partitions'");
  }
  if (static_cast<uint64_t>(t.moving_free_max) * 4 > c.psum.bank_bytes()) {
    throw ConfigError(
        "configuration key 'tensor.moving_free_max' must fit one PSUM bank of fp32 values");
  }

  c.vector = lane_engine(r, "vector");
  c.vector.max_free_elements_sbuf = r.count("vector.max_free_elements_sbuf", 1, 1 << 24);
  c.vector.max_free_elements_psum = r.count("vector.max_free_elements_psum", 1, 1 << 24);
  c.vector.perf_mode_copy_speedup = r.positive("vector.perf_mode_copy_speedup");
  c.vector.perf_mode_partial_speedup = r.positive("vector.perf_mode_partial_speedup");
  c.vector.perf_mode_tensor_tensor_speedup = r.positive("vector.perf_mode_tensor_tensor_speedup");
  c.scalar = lane_engine(r, "scalar");
  c.scalar.accumulate_cycles = r.count("scalar.accumulate_cycles", 0, 1 << 20);
  c.gpsimd = lane_engine(r, "gpsimd");
  c.gpsimd.start_cycles = r.count("gpsimd.start_cycles", 0, 1 << 20);

  DmaParams& d = c.dma;
  d.engines = r.count("dma.engines", 1, 256);
  d.queues = r.count("dma.queues", 1, 256);
  d.engine_bandwidth_bytes_per_s = r.positive("dma.engine_bandwidth_gbps") * 1e9;
  d.partitions_per_engine = r.count("dma.partitions_per_engine", 1, 1024);
  d.packet_bytes = r.count("dma.packet_bytes", 1, 1 << 30);
  d.descriptor_overhead_ns = r.non_negative("dma.descriptor_overhead_ns");
  d.launch_latency_ns = r.non_negative("dma.launch_latency_ns");
  d.transpose_efficiency_hbm = r.fraction("dma.transpose_efficiency_hbm");
  d.transpose_efficiency_sbuf = r.fraction("dma.transpose_efficiency_sbuf");
  d.strided_access_bytes = r.count("dma.strided_access_bytes", 1, 1 << 20);
  return chip;
}

}  // namespace neuronsim::device_model
