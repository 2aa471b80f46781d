#include "hbm_regions.h"

#include <cstring>
#include <random>

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/reference/host_checks.h"

namespace ncsim {

using neuronsim::device_model::DType;
using neuronsim::device_model::ProgramFormatError;

namespace {
DType dtype_of(const nlohmann::json& j, const std::string& where) {
  const std::string n = j.value("dtype", "fp32");
  auto t = neuronsim::device_model::parse_dtype(n);
  if (!t) throw ProgramFormatError(fmt::format("{}: unknown dtype '{}'", where, n));
  return *t;
}
}  // namespace

std::vector<RegionIo> read_region_io(const nlohmann::json& program) {
  std::vector<RegionIo> out;
  if (!program.contains("hbm_regions")) return out;
  for (const auto& r : program["hbm_regions"]) {
    RegionIo io;
    io.name = r.value("name", "");
    io.offset = r.value("offset", uint64_t{0});
    io.bytes = r.value("bytes", uint64_t{0});
    if (r.contains("init")) io.init = r["init"];
    if (r.contains("output")) {
      const auto& o = r["output"];
      io.output_dtype = o.is_string() ? o.get<std::string>() : std::string("fp32");
    }
    out.push_back(io);
  }
  return out;
}

void initialise_regions(const std::vector<RegionIo>& regions,
                        neuronsim::device_model::Device& dev) {
  for (const auto& r : regions) {
    if (r.init.is_null()) continue;
    const std::string where = "hbm region '" + r.name + "' init";
    if (r.offset + r.bytes > dev.hbm_capacity()) {
      throw ProgramFormatError(where + ": region lies outside HBM");
    }
    uint8_t* p = dev.hbm_data() + r.offset;
    const std::string kind = r.init.value("kind", "zeros");
    const DType t = dtype_of(r.init, where);
    const uint64_t n = r.bytes / neuronsim::device_model::dtype_size(t);
    const uint64_t seed = r.init.value("seed", uint64_t{1});
    if (kind == "zeros") {
      std::memset(p, 0, r.bytes);
    } else if (kind == "normal") {
      neuronsim::reference::fill_normal(p, t, n, seed, r.init.value("stddev", 1.0f));
    } else if (kind == "uniform" || kind == "ones" || kind == "iota") {
      std::mt19937_64 rng(seed);
      std::uniform_real_distribution<float> u(r.init.value("low", 0.0f),
                                              r.init.value("high", 1.0f));
      for (uint64_t i = 0; i < n; ++i) {
        const float v = kind == "ones" ? 1.0f : (kind == "iota" ? static_cast<float>(i) : u(rng));
        neuronsim::device_model::store_float(p + i * neuronsim::device_model::dtype_size(t), t, v);
      }
    } else {
      throw ProgramFormatError(
          fmt::format("{}: unknown kind '{}' (normal, uniform, zeros, ones, iota)", where, kind));
    }
  }
}

std::string describe_outputs(const std::vector<RegionIo>& regions,
                             neuronsim::device_model::Device& dev) {
  std::string out;
  for (const auto& r : regions) {
    if (r.output_dtype.empty()) continue;
    auto t = neuronsim::device_model::parse_dtype(r.output_dtype);
    if (!t) throw ProgramFormatError("hbm region '" + r.name + "': unknown output dtype");
    const auto v = neuronsim::reference::read_floats(
        dev.hbm_data() + r.offset, *t, r.bytes / neuronsim::device_model::dtype_size(*t));
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += static_cast<double>(x) * x;
    out += fmt::format("output {:<10} {} x {}: sum {:.6g}, sum of squares {:.6g}\n", r.name,
                       v.size(), r.output_dtype, sum, sq);
  }
  return out;
}

}  // namespace ncsim
