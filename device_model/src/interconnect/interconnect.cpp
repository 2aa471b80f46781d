#include "neuronsim/device_model/interconnect/interconnect.h"

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/params.h"

namespace neuronsim::device_model::interconnect {

using device_model::ConfigError;

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kMesh:
      return "mesh";
  }
  return "?";
}

namespace {
double positive(const device_model::Config& c, const char* key) {
  const double v = c.number(key);
  if (!(v > 0))
    throw ConfigError(fmt::format("configuration key '{}' must be > 0, got {}", key, v));
  return v;
}
double non_negative(const device_model::Config& c, const char* key) {
  const double v = c.number(key);
  if (!(v >= 0)) {
    throw ConfigError(fmt::format("configuration key '{}' must be >= 0, got {}", key, v));
  }
  return v;
}
uint32_t count(const device_model::Config& c, const char* key) {
  const int64_t v = c.integer(key);
  if (v < 1 || v > 1024) {
    throw ConfigError(fmt::format("configuration key '{}' must be in [1, 1024], got {}", key, v));
  }
  return static_cast<uint32_t>(v);
}
}  // namespace

InterconnectParams parse_interconnect_params(const device_model::Config& config) {
  const device_model::ChipParams chip = device_model::parse_chip_params(config);
  InterconnectParams p;
  p.instance_name = chip.instance_name;
  p.chips = chip.chips;
  p.cores_per_chip = chip.cores_per_chip / chip.logical_core_size;
  p.torus_rows = count(config, "instance.torus_rows");
  p.torus_cols = count(config, "instance.torus_cols");
  if (p.torus_rows * p.torus_cols != p.chips) {
    throw ConfigError(fmt::format(
        "configuration keys 'instance.torus_rows' x 'instance.torus_cols' ({} x {}) must equal "
        "'instance.chips' ({})",
        p.torus_rows, p.torus_cols, p.chips));
  }
  p.link_bytes_per_s = positive(config, "neuronlink.link_bandwidth_gbps") * 1e9;
  p.link_hop_latency_ns = non_negative(config, "neuronlink.hop_latency_ns");
  p.network_bytes_per_s = positive(config, "network.instance_bandwidth_gbps") * 1e9;
  p.network_latency_ns = non_negative(config, "network.latency_ns");
  const std::string algo = config.string("collectives.algorithm");
  bool known = false;
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kMesh}) {
    if (algo == algorithm_name(a)) p.algorithm = a, known = true;
  }
  if (!known) {
    throw ConfigError(fmt::format(
        "configuration key 'collectives.algorithm' must be auto, ring or mesh, got '{}'", algo));
  }
  const std::string inter = config.string("collectives.inter_instance");
  if (inter == "hierarchical") {
    p.inter_instance = InterInstance::kHierarchical;
  } else if (inter == "flat") {
    p.inter_instance = InterInstance::kFlat;
  } else {
    throw ConfigError(fmt::format(
        "configuration key 'collectives.inter_instance' must be hierarchical or flat, got '{}'",
        inter));
  }
  p.launch_overhead_ns = non_negative(config, "collectives.launch_overhead_ns");
  p.step_latency_ns = non_negative(config, "collectives.step_latency_ns");
  p.dma_bytes_per_s = positive(config, "collectives.dma_bandwidth_gbps") * 1e9;
  p.reduce_throughput_factor = positive(config, "collectives.reduce_throughput_factor");
  if (p.reduce_throughput_factor > 1) {
    throw ConfigError(fmt::format(
        "configuration key 'collectives.reduce_throughput_factor' must be in (0, 1], got {}",
        p.reduce_throughput_factor));
  }
  const int64_t mesh = config.integer("collectives.mesh_max_bytes");
  if (mesh < 0) {
    throw ConfigError(
        fmt::format("configuration key 'collectives.mesh_max_bytes' must be >= 0, got {}", mesh));
  }
  p.mesh_max_bytes = static_cast<uint64_t>(mesh);
  return p;
}

}  // namespace neuronsim::device_model::interconnect
