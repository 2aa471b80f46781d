#include "neuronsim/kernels/ops/random_draws.h"

#include <cmath>

#include "neuronsim/device_model/philox.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/reduction.h"

namespace neuronsim::kernels::ops {

namespace philox = device_model::philox;

std::vector<float> philox_float_draws(const RandomSpec& s, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<uint64_t>(i);
    float x = s.dist == device_model::RngDist::kNormal
                  ? s.a + s.b * philox::normal(s.seed, s.offset, k)
                  : s.a + (s.b - s.a) * philox::uniform(s.seed, s.offset, k);
    // The program's ScalarE log(u * -1 + 1) and VectorE scale, in the same fp32 steps.
    if (s.exponential) x = std::log(x * -1.0f + 1.0f) * (-1.0f / *s.exponential);
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

std::vector<int64_t> philox_integer_draws(const RandomSpec& s, int64_t lo, int64_t hi, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  const auto range = static_cast<uint64_t>(hi - lo);
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] =
        lo + static_cast<int64_t>(philox::bits(s.seed, s.offset, static_cast<uint64_t>(i)) % range);
  }
  return v;
}

Programs random_fill_programs(const std::string& name, const TensorDesc& out,
                              const RandomSpec& spec, const device_model::CoreParams& core) {
  return {build_random(name, out, spec, core)};
}

Programs multinomial_programs(const TensorDesc& probs, const TensorDesc& q,
                              const std::vector<TensorDesc>& sample_columns,
                              const std::vector<RandomSpec>& passes,
                              const device_model::CoreParams& core) {
  Expr ratio;
  ratio.alu(device_model::AluOp::kDivide, Arg::input(0), Arg::input(1));
  ReduceSpec argmax;
  argmax.dims = {1};
  argmax.op = device_model::ReduceOp::kMax;
  argmax.arg = true;
  Programs p;
  const char* name = "aten::multinomial";
  for (size_t i = 0; i < passes.size(); ++i) {
    p.push_back(build_random(name, q, passes[i], core));
    p.push_back(build_elementwise(name, {probs, q}, q, ratio, core));
    p.push_back(build_reduce(name, q, sample_columns.at(i), argmax, core));
  }
  return p;
}

}  // namespace neuronsim::kernels::ops
