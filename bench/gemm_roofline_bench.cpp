// gemm_roofline_bench: simulates the library GEMM (C = A @ B, A given as A^T [k, m], B [k, n]
// row-major, as `ncsim kernel gemm --no-bias --epilogue copy`) over a grid of shapes and prints
// each run's simulated time next to two bounds.
//
// Plain engine bound = max(TensorE, memory):
//   TensorE: 2mnk / peak (PE array x clock, fp32 at tensor.fp32_cost_factor of the bf16 rate);
//   memory: (mk + kn) input bytes + mn output bytes once, at min(HBM stack, the core's DMA
//           engines) -- the slower of the two binds ("HBM" on trn1, "DMA" for one trn2 core).
//
// Latency-aware bound: the plain bound plus what no schedule can hide, every term a latency the
// simulator charges (preset keys in brackets) and that a perfect schedule still pays:
//   L      = a DMA transfer's launch latency before its data moves [dma.launch_latency_ns, or
//            hbm.latency_ns if larger] -- charged per transfer, pipelined only behind earlier
//            transfers of the same queue, so the kernel's first load and its last store (which
//            cannot be issued before the result exists) each pay it in full;
//   desc   = the per-packet descriptor time of a transfer of min(k, 128) (or min(m, 128)) SBUF
//            partitions [dma.descriptor_overhead_ns x ceil(rows / dma.partitions_per_engine)
//            packets per engine, one packet per partition row of <= dma.packet_bytes];
//   first  = the first matmul's operands: one stationary tile [min(k,128) x min(m,128)] and a
//            moving tile of min(n, tensor.mm_min_ii_cycles) columns (the narrowest full-rate
//            matmul), at min(DMA engines, HBM) bandwidth;
//   ls     = that matmul's LoadStationary, which starts once both operands are in and has no
//            earlier matmul to run behind [ceil(min(m,128) / tensor.load_stationary_speedup)
//            cycles, x tensor.fp32_cost_factor for fp32];
//   evict  = after TensorE's last matmul [tensor.pipeline_latency_cycles]: PSUM -> SBUF copy of
//            the last [min(m,128) x min(n,64)] piece on the faster of VectorE/ScalarE
//            [max(min_ii_cycles, 64) + pipeline_latency_cycles] (DMA cannot read PSUM);
//   store  = that piece's store: L + desc + its bytes at min(DMA engines, HBM) bandwidth.
// With start = L + desc + first + ls and drain = evict + store, the latency-aware bound is
//   max(start + TensorE + drain,          TensorE cannot start before its first operands land,
//                                          and the last result still has to leave;
//       L + desc + (in + out bytes) / bw,  no byte moves before the first transfer's latency;
//       L + in bytes / bw + drain)         the last input byte precedes the last result.
// It is a lower bound for any schedule on this model (not the plain bound plus a fudge factor).
// A row whose latency-aware bound is itself more than 10% above the plain bound can never come
// within 10% of it: the last column names the latency terms that make up the difference (each
// over 10% of the plain bound; L and desc count twice when both the first load and the last
// store pay them).
// One process per preset (SystemC elaborates once). See bench/README.md.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/device_model/device.h"
#include "neuronsim/kernels/dense_gemm.h"

using namespace neuronsim;

namespace {

struct Row {
  device_model::DType dtype;
  uint32_t m, k, n;
  double sim_s = 0, tensor_s = 0, memory_s = 0, lat_s = 0;
  double bound() const { return std::max(tensor_s, memory_s); }
};

std::vector<uint32_t> parse_dims(const char* s) {
  std::vector<uint32_t> v;
  for (const char* p = s; *p;) {
    v.push_back(static_cast<uint32_t>(std::strtoul(p, const_cast<char**>(&p), 10)));
    if (*p == ',') ++p;
  }
  return v;
}

int usage() {
  std::fprintf(stderr,
               "usage: gemm_roofline_bench [--preset trn1|trn2] [--dtype bf16|fp32|both]\n"
               "                           [--dims 512,2048,...] [--shape MxKxN]...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "trn1", dtype = "both";
  std::vector<uint32_t> dims = {512, 1024, 2048, 4096, 8192, 16384};
  std::vector<std::array<uint32_t, 3>> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--preset") {
      preset = argv[++i];
    } else if (a == "--dtype") {
      dtype = argv[++i];
    } else if (a == "--dims") {
      dims = parse_dims(argv[++i]);
    } else if (a == "--shape") {
      std::array<uint32_t, 3> s{};
      if (std::sscanf(argv[++i], "%ux%ux%u", &s[0], &s[1], &s[2]) != 3) return usage();
      shapes.push_back(s);
    } else {
      return usage();
    }
  }
  if (shapes.empty()) {
    for (uint32_t m : dims)
      for (uint32_t k : dims)
        for (uint32_t n : dims) shapes.push_back({m, k, n});
  }
  std::vector<device_model::DType> dtypes;
  if (dtype == "bf16" || dtype == "both") dtypes.push_back(device_model::DType::kBf16);
  if (dtype == "fp32" || dtype == "both") dtypes.push_back(device_model::DType::kFp32);
  if (dtypes.empty()) return usage();

  device_model::DeviceOptions o;
  o.cores = 1;
  o.mode = device_model::ExecMode::kTiming;
  device_model::Device dev(device_model::Config::load(preset), o);
  const auto& chip = dev.params();
  const auto& t = chip.core.tensor;
  const double dma_bw = chip.core.dma.engines * chip.core.dma.engine_bandwidth_bytes_per_s;
  const double mem_bw = std::min(chip.hbm.bandwidth_bytes_per_s, dma_bw);
  const char* mem_name = chip.hbm.bandwidth_bytes_per_s <= dma_bw ? "HBM" : "DMA";
  // Latency terms (see the header).
  const auto& dp = chip.core.dma;
  const double L = std::max(dp.launch_latency_ns, chip.hbm.latency_ns) * 1e-9;
  auto desc_s = [&](uint32_t rows) {  // rows of <= packet_bytes each, over the engines they use
    const uint32_t engines =
        std::min(dp.engines, (rows + dp.partitions_per_engine - 1) / dp.partitions_per_engine);
    return std::ceil(double(rows) / std::max(1u, engines)) * dp.descriptor_overhead_ns * 1e-9;
  };
  const auto& ve = chip.core.vector;
  const auto& se = chip.core.scalar;
  auto evict_s = [&](const device_model::LaneEngineParams& e, uint32_t cols) {
    return (std::max<double>(e.min_ii_cycles, cols) + e.pipeline_latency_cycles) / e.frequency_hz;
  };
  std::printf(
      "gemm_roofline_bench: %s, one NeuronCore, timing mode. C = A @ B, A given as A^T [k, m],\n"
      "B [k, n] and C [m, n] row-major, C in the input dtype.\n"
      "plain bound = max(TensorE 2mnk / %.2f TFLOP/s (bf16; fp32 / %.0f), memory (mk + kn + mn) x "
      "bytes / %.0f GB/s (%s))\n"
      "latency-aware bound = max(start + TensorE + drain, L + desc + bytes / bw, L + input bytes "
      "/ bw + drain)\n"
      "  start = L + desc + first tiles + LoadStationary, drain = TensorE latency + evict + L + "
      "desc + piece store;"
      "\n  L = %.0f ns [dma.launch_latency_ns], desc = %.1f ns [8 packets/engine x "
      "dma.descriptor_overhead_ns], evict >= %.0f ns [%s min_ii + pipeline_latency_cycles]\n\n",
      preset.c_str(), chip.tensor_peak_flops() * 1e-12, t.fp32_cost_factor, mem_bw * 1e-9, mem_name,
      L * 1e9, desc_s(128) * 1e9, std::min(evict_s(ve, 64), evict_s(se, 64)) * 1e9,
      evict_s(ve, 64) <= evict_s(se, 64) ? "vector" : "scalar");
  std::printf("%-5s %6s %6s %6s %12s %12s %-7s %9s %12s %9s  %s\n", "dtype", "m", "k", "n",
              "simulated", "plain", "binds", "sim/plain", "lat-aware", "sim/lat",
              "why >10% over plain (us)");
  std::vector<Row> rows;
  for (device_model::DType dt : dtypes) {
    for (const auto& s : shapes) {
      Row r{dt, s[0], s[1], s[2]};
      kernels::GemmSpec g;
      g.m = r.m, g.k = r.k, g.n = r.n;
      g.in_dtype = g.out_dtype = dt;
      const uint64_t es = device_model::dtype_size(dt);
      auto align = [](uint64_t x) { return (x + 4095) / 4096 * 4096; };
      kernels::GemmAddresses ad;
      ad.a_t = 0;
      ad.b = align(uint64_t{r.k} * r.m * es);
      ad.c = ad.b + align(uint64_t{r.k} * r.n * es);
      const device_model::Program p = kernels::build_gemm(g, ad, chip.core);
      r.sim_s = dev.run(0, p).duration().ps * 1e-12;
      const double flops = 2.0 * r.m * r.n * r.k;
      const double factor = dt == device_model::DType::kFp32 ? t.fp32_cost_factor : 1.0;
      r.tensor_s = flops * factor / chip.tensor_peak_flops();
      const double in_bytes = (double(r.m) * r.k + double(r.k) * r.n) * es;
      const double out_bytes = double(r.m) * r.n * es;
      r.memory_s = (in_bytes + out_bytes) / mem_bw;
      const uint32_t kp = std::min<uint32_t>(r.k, t.rows), mp = std::min<uint32_t>(r.m, t.rows);
      const uint32_t piece = std::min<uint32_t>(r.n, t.mm_min_ii_cycles);
      const double first =
          (double(kp) * std::min<uint32_t>(r.m, t.columns) + double(kp) * piece) * es / mem_bw;
      // The first matmul's LoadStationary starts once both operands are in (nothing before it
      // to hide behind): ceil(stationary columns / load_stationary_speedup) cycles, x fp32.
      const double ls = std::ceil(std::min<uint32_t>(r.m, t.columns) / t.load_stationary_speedup) *
                        factor / t.frequency_hz;
      const double mm_lat = t.pipeline_latency_cycles / t.frequency_hz;
      const double evict = std::min(evict_s(ve, piece), evict_s(se, piece));
      const double store = double(mp) * piece * es / mem_bw;
      const double start = L + desc_s(kp) + first + ls;
      const double drain = mm_lat + evict + L + desc_s(mp) + store;
      const double t1 = start + r.tensor_s + drain, t2 = L + desc_s(kp) + r.memory_s,
                   t3 = L + in_bytes / mem_bw + drain;
      r.lat_s = std::max({t1, t2, t3});
      // Why a row can never come within 10% of the plain bound: the latency terms of the
      // binding latency-aware term that are each more than 10% of the plain bound.
      std::string why;
      if (r.lat_s > 1.1 * r.bound()) {
        std::vector<std::pair<const char*, double>> terms;
        if (r.lat_s == t2) {
          terms = {{"L", L}, {"desc", desc_s(kp)}};
        } else {
          terms = {{"L", 2 * L},
                   {"desc", desc_s(kp) + desc_s(mp)},
                   {"evict", evict},
                   {"mm-lat", mm_lat},
                   {"store", store}};
          if (r.lat_s == t1) {
            terms.push_back({"first", first});
            terms.push_back({"ls", ls});
          }
        }
        for (const auto& [name, v] : terms) {
          if (v <= 0.1 * r.bound()) continue;
          why += fmt::format("{}{} {:.2f}", why.empty() ? "" : ", ", name, v * 1e6);
        }
        why = "latency: " + why;
      }
      std::printf("%-5s %6u %6u %6u %9.3f us %9.3f us %-7s %9.3f %9.3f us %9.3f  %s\n",
                  std::string(device_model::dtype_name(dt)).c_str(), r.m, r.k, r.n, r.sim_s * 1e6,
                  r.bound() * 1e6, r.tensor_s >= r.memory_s ? "TensorE" : mem_name,
                  r.sim_s / r.bound(), r.lat_s * 1e6, r.sim_s / r.lat_s, why.c_str());
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  auto report = [&](const char* what, auto bound) {
    const auto worst = std::max_element(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      return a.sim_s / bound(a) < b.sim_s / bound(b);
    });
    const size_t within = std::count_if(rows.begin(), rows.end(),
                                        [&](const Row& r) { return r.sim_s <= 1.1 * bound(r); });
    std::printf("%zu of %zu rows within 10%% of their %s bound; worst %s %ux%ux%u at %.3fx\n",
                within, rows.size(), what,
                std::string(device_model::dtype_name(worst->dtype)).c_str(), worst->m, worst->k,
                worst->n, worst->sim_s / bound(*worst));
  };
  std::printf("\n");
  report("plain", [](const Row& r) { return r.bound(); });
  report("latency-aware", [](const Row& r) { return r.lat_s; });
  const auto misses = std::count_if(rows.begin(), rows.end(),
                                    [](const Row& r) { return r.sim_s > 1.1 * r.bound(); });
  const auto latency_bound = std::count_if(rows.begin(), rows.end(), [](const Row& r) {
    return r.sim_s > 1.1 * r.bound() && r.lat_s > 1.1 * r.bound();
  });
  std::printf(
      "%td of the %td plain misses have a latency-aware bound over 1.1x the plain bound "
      "(last column)\n",
      latency_bound, misses);
  return 0;
}
