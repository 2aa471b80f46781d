#pragma once
// Plain host code doing the math of the benchmarked kernels, in fp32 on the host CPU, compiled
// with the same flags as neuronsim (no -march=native). Full-mode benchmarks divide their host time
// by these.
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <vector>

namespace neuronsim::bench {

/// C = gelu(A @ B + bias) for m = k = n = size with Eigen (fp32, row-major, single thread);
/// returns a checksum so the work cannot be optimised away.
double eigen_gemm_bias_gelu(uint32_t size);
/// The same with a straightforward i-k-j triple loop.
double naive_gemm_bias_gelu(uint32_t size);
/// y = (x - mean) / sqrt(var + eps) * gamma + beta over the rows of x [rows, dim] with Eigen.
double eigen_layernorm(uint32_t rows, uint32_t dim);

/// CPU seconds used by this process so far. The benchmarks are single-threaded, so on an idle
/// machine this is wall time; on a loaded one it leaves out time spent waiting for a core.
inline double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Host CPU seconds per call of fn(): the median of at least 3 timed calls (more, up to 50, until
/// 0.3 s have been spent), after one untimed warm-up call.
template <typename Fn>
double time_reference(Fn&& fn) {
  volatile double sink = fn();
  std::vector<double> times;
  double total = 0;
  while (times.size() < 3 || (total < 0.3 && times.size() < 50)) {
    const double t0 = cpu_seconds();
    sink = sink + fn();
    const double dt = cpu_seconds() - t0;
    times.push_back(dt);
    total += dt;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace neuronsim::bench
