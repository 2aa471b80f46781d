#pragma once
// Host reference implementations of the library's kernels (double precision over the device-
// rounded inputs), for checking results in tests and the demo.
#include <cstdint>
#include <random>
#include <vector>

#include "neuronsim/device/dtype.h"
#include "neuronsim/kernels/gemm.h"
#include "neuronsim/kernels/layernorm.h"

namespace neuronsim::kernels {

/// Fills `count` elements at `dst` with N(0, stddev) values rounded to `t`.
void fill_normal(uint8_t* dst, device::DType t, uint64_t count, uint64_t seed, float stddev = 1.0f);
/// Reads `count` elements as floats.
std::vector<float> read_floats(const uint8_t* src, device::DType t, uint64_t count);

/// C as the GEMM kernel defines it, from the operands in HBM.
std::vector<double> reference_gemm(const GemmSpec& s, const uint8_t* hbm, const GemmAddresses& a);
std::vector<double> reference_layernorm(const LayerNormSpec& s, const uint8_t* hbm,
                                        const LayerNormAddresses& a);

struct Comparison {
  double max_abs_error = 0;
  double max_rel_error = 0;  // relative to max(|reference|, 1)
  uint64_t mismatches = 0;   // elements beyond the tolerance
};
/// Compares device output against a reference with |d - r| <= atol + rtol * |r|.
Comparison compare(const std::vector<float>& device_out, const std::vector<double>& reference,
                   double atol, double rtol);

}  // namespace neuronsim::kernels
