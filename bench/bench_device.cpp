#include "bench_device.h"

#include <memory>

#include "neuronsim/reference/host_checks.h"

namespace neuronsim::bench {
namespace {

std::unique_ptr<device_model::Device>& device_slot() {
  static std::unique_ptr<device_model::Device> dev;
  return dev;
}

// A bump allocator over core 0's HBM stack: every workload gets its own 4 KiB-aligned range.
uint64_t hbm_alloc(uint64_t bytes) {
  static uint64_t next = 0;
  const uint64_t at = next;
  next = (next + bytes + 4095) / 4096 * 4096;
  return at;
}

}  // namespace

device_model::Device& bench_device() {
  auto& dev = device_slot();
  if (!dev) {
    device_model::DeviceOptions o;
    o.cores = 1;
    o.mode = device_model::ExecMode::kTiming;
    dev = std::make_unique<device_model::Device>(device_model::Config::load("trn1"), o);
  }
  return *dev;
}

void shutdown_bench_device() {
  device_slot().reset();
}

std::map<std::string, Measurement>& measurements() {
  static std::map<std::string, Measurement> m;
  return m;
}

GemmWorkload make_gemm(uint32_t size, bool fill_inputs) {
  device_model::Device& dev = bench_device();
  GemmWorkload w;
  kernels::GemmSpec& s = w.spec;
  s.m = s.k = s.n = size;
  s.bias = true;
  s.epilogue = device_model::ActFunc::kGelu;
  const uint64_t es = device_model::dtype_size(s.in_dtype),
                 oes = device_model::dtype_size(s.out_dtype);
  w.addr.a_t = hbm_alloc(uint64_t{s.k} * s.m * es);
  w.addr.b = hbm_alloc(uint64_t{s.k} * s.n * es);
  w.addr.bias = hbm_alloc(uint64_t{s.n} * es);
  w.addr.c = hbm_alloc(uint64_t{s.m} * s.n * oes);
  if (fill_inputs) {
    uint8_t* hbm = dev.hbm_data();
    reference::fill_normal(hbm + w.addr.a_t, s.in_dtype, uint64_t{s.k} * s.m, 1);
    reference::fill_normal(hbm + w.addr.b, s.in_dtype, uint64_t{s.k} * s.n, 2, 0.05f);
    reference::fill_normal(hbm + w.addr.bias, s.in_dtype, s.n, 3);
  }
  w.program = kernels::build_gemm(s, w.addr, dev.params().core);
  return w;
}

LayerNormWorkload make_layernorm(uint32_t rows, uint32_t dim, bool fill_inputs) {
  device_model::Device& dev = bench_device();
  LayerNormWorkload w;
  kernels::LayerNormSpec& s = w.spec;
  s.rows = rows;
  s.dim = dim;
  const uint64_t es = device_model::dtype_size(s.dtype);
  w.addr.x = hbm_alloc(uint64_t{rows} * dim * es);
  w.addr.gamma = hbm_alloc(uint64_t{dim} * es);
  w.addr.beta = hbm_alloc(uint64_t{dim} * es);
  w.addr.y = hbm_alloc(uint64_t{rows} * dim * es);
  if (fill_inputs) {
    uint8_t* hbm = dev.hbm_data();
    reference::fill_normal(hbm + w.addr.x, s.dtype, uint64_t{rows} * dim, 4);
    reference::fill_normal(hbm + w.addr.gamma, s.dtype, dim, 5);
    reference::fill_normal(hbm + w.addr.beta, s.dtype, dim, 6);
  }
  w.program = kernels::build_layernorm(s, w.addr, dev.params().core);
  return w;
}

}  // namespace neuronsim::bench
