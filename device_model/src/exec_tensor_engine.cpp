// TensorE opcodes: matmul into PSUM and transpose.
#include <cstring>
#include <vector>

#include "exec_ops.h"
#include "executor_rows.h"
#include "matmul_kernel.h"

namespace neuronsim::device_model::exec {

void exec_matmul(const Instruction& in, const MemoryMap& mem) {
  // dst[m, n] (+)= sum_k stationary[k, m] * moving[k, n]; each product rounded to fp32 and summed
  // in k order in fp32, then added to PSUM in fp32.
  // Double row: partition p holds contraction rows p and P + p as its two free halves.
  const uint32_t R = in.perf_mode == MatmulPerfMode::kDoubleRow ? 2 : 1;
  const uint32_t P = in.src0.partitions, K = P * R;
  const uint32_t M = static_cast<uint32_t>(in.src0.free_elements()) / R;
  const uint32_t N = static_cast<uint32_t>(in.src1.free_elements()) / R;
  std::vector<float> stat_t(static_cast<size_t>(M) * K), mov(static_cast<size_t>(K) * N), row;
  for (uint32_t p = 0; p < P; ++p) {
    load_row(mem, in.src0, p, row);
    for (uint32_t r = 0; r < R; ++r) {
      const uint32_t k = r * P + p;
      for (uint32_t m = 0; m < M; ++m) stat_t[static_cast<size_t>(m) * K + k] = row[r * M + m];
    }
    load_row(mem, in.src1, p, row);
    for (uint32_t r = 0; r < R; ++r) {
      std::memcpy(&mov[static_cast<size_t>(r * P + p) * N], row.data() + r * N, N * sizeof(float));
    }
  }
  std::vector<float> res(static_cast<size_t>(M) * N);
  matmul_kernel(stat_t.data(), mov.data(), res.data(), M, K, N);
  std::vector<float> acc(N), out;
  for (uint32_t m = 0; m < M; ++m) {
    std::memcpy(acc.data(), &res[static_cast<size_t>(m) * N], N * sizeof(float));
    if (in.accumulate) {
      load_row(mem, in.dst, m, out);
      for (uint32_t n = 0; n < N; ++n) acc[n] = out[n] + acc[n];
    }
    store_row(mem, in.dst, m, acc);
  }
}

void exec_transpose(const Instruction& in, const MemoryMap& mem) {
  const uint32_t P = in.src0.partitions;
  const uint32_t F = static_cast<uint32_t>(in.src0.free_elements());
  std::vector<float> src(static_cast<size_t>(P) * F), row, out(P);
  for (uint32_t p = 0; p < P; ++p) {
    load_row(mem, in.src0, p, row);
    std::memcpy(&src[static_cast<size_t>(p) * F], row.data(), F * sizeof(float));
  }
  for (uint32_t f = 0; f < F; ++f) {
    for (uint32_t p = 0; p < P; ++p) out[p] = src[static_cast<size_t>(p) * F + f];
    store_row(mem, in.dst, f, out);
  }
}

}  // namespace neuronsim::device_model::exec
