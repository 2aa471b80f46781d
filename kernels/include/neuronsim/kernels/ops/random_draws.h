#pragma once
// The device side of the random ops (the backend keeps the generators and the CPU streams):
// the values a Philox stream gives, exactly as the rng instruction and the fill program's
// steps compute them, and multinomial's Gumbel-max passes.
#include <cstdint>
#include <vector>

#include "neuronsim/kernels/ops/op_rule.h"
#include "neuronsim/kernels/random.h"

namespace neuronsim::kernels::ops {

/// Element i's value of a uniform, normal or exponential fill (row-major order), in fp32.
std::vector<float> philox_float_draws(const RandomSpec& s, int64_t n);
/// Element i's value of an integer fill in [lo, hi), with the exact 64-bit range.
std::vector<int64_t> philox_integer_draws(const RandomSpec& s, int64_t lo, int64_t hi, int64_t n);

/// The random fill of `out` (bernoulli's p tensor and dropout's operands in the spec).
Programs random_fill_programs(const std::string& name, const TensorDesc& out,
                              const RandomSpec& spec, const device_model::CoreParams& core);

/// multinomial with replacement: one Gumbel-max pass per sample — exponential draws into q,
/// probs / q, and the argmax of each row into the sample's column of the result.
Programs multinomial_programs(const TensorDesc& probs, const TensorDesc& q,
                              const std::vector<TensorDesc>& sample_columns,
                              const std::vector<RandomSpec>& passes,
                              const device_model::CoreParams& core);

}  // namespace neuronsim::kernels::ops
