#pragma once
// Test and demo support, not part of the kernel library: random HBM data, host reference
// implementations of the demo kernels (double precision over the device-rounded inputs) and a
// tolerance check of device results against them.
#include <cstdint>
#include <random>
#include <vector>

#include "neuronsim/device_model/dtype.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/dense_layer_norm.h"

namespace neuronsim::reference {

/// Fills `count` elements at `dst` with N(0, stddev) values rounded to `t`.
void fill_normal(uint8_t* dst, device_model::DType t, uint64_t count, uint64_t seed,
                 float stddev = 1.0f);
/// Reads `count` elements as floats.
std::vector<float> read_floats(const uint8_t* src, device_model::DType t, uint64_t count);

/// C as the GEMM kernel defines it, from the operands in HBM.
std::vector<double> gemm(const kernels::GemmSpec& s, const uint8_t* hbm,
                         const kernels::GemmAddresses& a);
std::vector<double> layernorm(const kernels::LayerNormSpec& s, const uint8_t* hbm,
                              const kernels::LayerNormAddresses& a);

struct Comparison {
  double max_abs_error = 0;
  double max_rel_error = 0;  // relative to max(|reference|, 1)
  uint64_t mismatches = 0;   // elements beyond the tolerance
};
/// Compares device output against a reference with |d - r| <= atol + rtol * |r|.
Comparison compare(const std::vector<float>& device_out, const std::vector<double>& reference,
                   double atol, double rtol);

}  // namespace neuronsim::reference
