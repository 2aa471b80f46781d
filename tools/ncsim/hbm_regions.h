#pragma once
// Program files describe their HBM regions with an optional "init" (how the tool fills them) and
// "output" (report a checksum after the run).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/device_model/device.h"

namespace ncsim {

struct RegionIo {
  std::string name;
  uint64_t offset = 0, bytes = 0;
  nlohmann::json init;  // {"kind": "normal|uniform|zeros|ones|iota", "dtype": ..., "seed": ...}
  std::string output_dtype;  // empty: not an output
};

std::vector<RegionIo> read_region_io(const nlohmann::json& program);
void initialise_regions(const std::vector<RegionIo>& regions, neuronsim::device_model::Device& dev);
/// One line per output region: element count, sum and sum of squares of its values.
std::string describe_outputs(const std::vector<RegionIo>& regions,
                             neuronsim::device_model::Device& dev);

}  // namespace ncsim
