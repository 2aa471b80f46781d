// tensor_reduce: reductions over the innermost free axes.
#include <algorithm>
#include <vector>

#include "exec_ops.h"
#include "executor_rows.h"
#include "neuronsim/device_model/executor.h"

namespace neuronsim::device_model::exec {
namespace {

float reduce_step(ReduceOp r, float acc, float x) {
  switch (r) {
    case ReduceOp::kAdd:
      return acc + x;
    case ReduceOp::kMax:
      return apply_alu_float(AluOp::kMax, acc, x);
    case ReduceOp::kMin:
      return apply_alu_float(AluOp::kMin, acc, x);
    case ReduceOp::kMultiply:
      return acc * x;
  }
  return acc;
}

}  // namespace

void exec_tensor_reduce(const Instruction& in, const MemoryMap& mem) {
  uint64_t inner = 1;
  for (int k = in.src0.ndims - in.reduce_axes; k < in.src0.ndims; ++k)
    inner *= in.src0.dims[k].size;
  const bool int_path = all_int({in.dst.dtype, in.src0.dtype});
  std::vector<float> a, out;
  std::vector<int64_t> ai, outi;
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    if (int_path) {
      load_row_int(mem, in.src0, p, ai);
      outi.assign(ai.size() / inner, 0);
      for (size_t o = 0; o < outi.size(); ++o) {
        int64_t acc = ai[o * inner];
        for (uint64_t i = 1; i < inner; ++i) {
          const int64_t x = ai[o * inner + i];
          switch (in.reduce) {
            case ReduceOp::kAdd:
              acc = apply_alu_int(AluOp::kAdd, acc, x);
              break;
            case ReduceOp::kMax:
              acc = std::max(acc, x);
              break;
            case ReduceOp::kMin:
              acc = std::min(acc, x);
              break;
            case ReduceOp::kMultiply:
              acc = apply_alu_int(AluOp::kMultiply, acc, x);
              break;
          }
        }
        outi[o] = acc;
      }
      store_row_int(mem, in.dst, p, outi);
      continue;
    }
    load_row(mem, in.src0, p, a);
    out.assign(a.size() / inner, 0.0f);
    for (size_t o = 0; o < out.size(); ++o) {
      float acc = a[o * inner];
      for (uint64_t i = 1; i < inner; ++i) acc = reduce_step(in.reduce, acc, a[o * inner + i]);
      out[o] = acc;
    }
    store_row(mem, in.dst, p, out);
  }
}

}  // namespace neuronsim::device_model::exec
