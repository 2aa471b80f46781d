// gemm_roofline_bench: simulates the library GEMM (C = A @ B, A given as A^T [k, m], B [k, n]
// row-major, as `ncsim kernel gemm --no-bias --epilogue copy`) over a grid of shapes and prints
// each run's simulated time next to its roofline bound, max(TensorE, memory):
//   TensorE: 2mnk / peak (PE array x clock, fp32 at tensor.fp32_cost_factor of the bf16 rate);
//   memory: (mk + kn) input bytes + mn output bytes once, at min(HBM stack, the core's DMA
//           engines) -- the slower of the two binds ("HBM" on trn1, "DMA" for one trn2 core).
// One process per preset (SystemC elaborates once). See bench/README.md.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "neuronsim/device/device.h"
#include "neuronsim/kernels/gemm.h"

using namespace neuronsim;

namespace {

struct Row {
  device::DType dtype;
  uint32_t m, k, n;
  double sim_s = 0, tensor_s = 0, memory_s = 0;
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
  std::vector<device::DType> dtypes;
  if (dtype == "bf16" || dtype == "both") dtypes.push_back(device::DType::kBf16);
  if (dtype == "fp32" || dtype == "both") dtypes.push_back(device::DType::kFp32);
  if (dtypes.empty()) return usage();

  device::DeviceOptions o;
  o.cores = 1;
  o.mode = device::ExecMode::kTiming;
  device::Device dev(device::Config::load(preset), o);
  const auto& chip = dev.params();
  const auto& t = chip.core.tensor;
  const double dma_bw = chip.core.dma.engines * chip.core.dma.engine_bandwidth_bytes_per_s;
  const double mem_bw = std::min(chip.hbm.bandwidth_bytes_per_s, dma_bw);
  const char* mem_name = chip.hbm.bandwidth_bytes_per_s <= dma_bw ? "HBM" : "DMA";
  std::printf(
      "gemm_roofline_bench: %s, one NeuronCore, timing mode. C = A @ B, A given as A^T [k, m],\n"
      "B [k, n] and C [m, n] row-major, C in the input dtype.\n"
      "bound = max(TensorE 2mnk / %.2f TFLOP/s (bf16; fp32 / %.0f), memory (mk + kn + mn) x "
      "bytes / %.0f GB/s (%s))\n\n",
      preset.c_str(), chip.tensor_peak_flops() * 1e-12, t.fp32_cost_factor, mem_bw * 1e-9,
      mem_name);
  std::printf("%-5s %6s %6s %6s %13s %13s %-7s %9s\n", "dtype", "m", "k", "n", "simulated", "bound",
              "binds", "sim/bound");

  std::vector<Row> rows;
  for (device::DType dt : dtypes) {
    for (const auto& s : shapes) {
      Row r{dt, s[0], s[1], s[2]};
      kernels::GemmSpec g;
      g.m = r.m, g.k = r.k, g.n = r.n;
      g.in_dtype = g.out_dtype = dt;
      const uint64_t es = device::dtype_size(dt);
      auto align = [](uint64_t x) { return (x + 4095) / 4096 * 4096; };
      kernels::GemmAddresses ad;
      ad.a_t = 0;
      ad.b = align(uint64_t{r.k} * r.m * es);
      ad.c = ad.b + align(uint64_t{r.k} * r.n * es);
      const device::Program p = kernels::build_gemm(g, ad, chip.core);
      r.sim_s = dev.run(0, p).duration().ps * 1e-12;
      const double flops = 2.0 * r.m * r.n * r.k;
      const double factor = dt == device::DType::kFp32 ? t.fp32_cost_factor : 1.0;
      r.tensor_s = flops * factor / chip.tensor_peak_flops();
      r.memory_s = (double(r.m) * r.k + double(r.k) * r.n + double(r.m) * r.n) * es / mem_bw;
      std::printf("%-5s %6u %6u %6u %10.3f us %10.3f us %-7s %9.3f\n",
                  std::string(device::dtype_name(dt)).c_str(), r.m, r.k, r.n, r.sim_s * 1e6,
                  r.bound() * 1e6, r.tensor_s >= r.memory_s ? "TensorE" : mem_name,
                  r.sim_s / r.bound());
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  const auto worst = std::max_element(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.sim_s / a.bound() < b.sim_s / b.bound();
  });
  const size_t within = std::count_if(rows.begin(), rows.end(),
                                      [](const Row& r) { return r.sim_s <= 1.1 * r.bound(); });
  std::printf("\n%zu of %zu rows within 10%% of their bound; worst %s %ux%ux%u at %.3fx\n", within,
              rows.size(), std::string(device::dtype_name(worst->dtype)).c_str(), worst->m,
              worst->k, worst->n, worst->sim_s / worst->bound());
  return 0;
}
