// Elementwise opcodes: activation, tensor_tensor, tensor_scalar and select, on the fp32 path
// or, for integer data, the exact int64 path.
#include <vector>

#include "exec_ops.h"
#include "executor_rows.h"
#include "neuronsim/device_model/executor.h"

namespace neuronsim::device_model::exec {
namespace {

// x[i] = op(x[i], y(i)) over a row, or op(y(i), x[i]) when `reverse`. The plain arithmetic
// operators run as a loop of the one IEEE operation apply_alu_float performs for them (the
// compiler vectorises it); every other operator calls apply_alu_float per element.
template <typename Y>
void alu_row(AluOp op, bool reverse, std::vector<float>& x, Y&& y) {
  const auto loop = [&](auto f) {
    if (reverse) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = f(y(i), x[i]);
    } else {
      for (size_t i = 0; i < x.size(); ++i) x[i] = f(x[i], y(i));
    }
  };
  switch (op) {
    case AluOp::kAdd:
      return loop([](float a, float b) { return a + b; });
    case AluOp::kSubtract:
      return loop([](float a, float b) { return a - b; });
    case AluOp::kMultiply:
      return loop([](float a, float b) { return a * b; });
    case AluOp::kDivide:
      return loop([](float a, float b) { return a / b; });
    default:
      return loop([op](float a, float b) { return apply_alu_float(op, a, b); });
  }
}

}  // namespace

void exec_activation(const Instruction& in, const MemoryMap& mem) {
  std::vector<float> row;
  for (uint32_t p = 0; p < in.src0.partitions; ++p) {
    load_row(mem, in.src0, p, row);
    const float scale = scalar_value(mem, in.operand0, p);
    const float bias = scalar_value(mem, in.operand1, p);
    // A zero bias adds nothing: -0.0 * scale + 0.0 would be +0.0, and reciprocal/rsqrt of
    // -0.0 must stay -inf as on the CPU.
    const bool add_bias = bias != 0.0f;
    float sum = 0.0f;
    for (size_t i = 0; i < row.size(); ++i) {
      const float x = row[i] * scale;
      row[i] = apply_activation(in.func, add_bias ? x + bias : x);
      sum = i == 0 ? row[i] : sum + row[i];
    }
    store_row(mem, in.dst, p, row);
    if (in.has_acc_dst) store_row(mem, in.acc_dst, p, std::vector<float>{sum});
  }
}

void exec_tensor_tensor(const Instruction& in, const MemoryMap& mem) {
  if (all_int({in.dst.dtype, in.src0.dtype, in.src1.dtype})) {
    std::vector<int64_t> a, b;
    for (uint32_t p = 0; p < in.dst.partitions; ++p) {
      load_row_int(mem, in.src0, p, a);
      load_row_int(mem, in.src1, p, b);
      for (size_t i = 0; i < a.size(); ++i) a[i] = apply_alu_int(in.alu0, a[i], b[i]);
      store_row_int(mem, in.dst, p, a);
    }
    return;
  }
  std::vector<float> a, b;
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    load_row(mem, in.src0, p, a);
    load_row(mem, in.src1, p, b);
    alu_row(in.alu0, false, a, [&b](size_t i) { return b[i]; });
    store_row(mem, in.dst, p, a);
  }
}

void exec_tensor_scalar(const Instruction& in, const MemoryMap& mem) {
  if (all_int({in.dst.dtype, in.src0.dtype}) && scalar_is_int(in.operand0) &&
      scalar_is_int(in.operand1)) {
    std::vector<int64_t> a;
    for (uint32_t p = 0; p < in.dst.partitions; ++p) {
      load_row_int(mem, in.src0, p, a);
      const int64_t s0 = scalar_value_int(mem, in.operand0, p);
      const int64_t s1 = scalar_value_int(mem, in.operand1, p);
      for (auto& x : a) {
        x = in.reverse0 ? apply_alu_int(in.alu0, s0, x) : apply_alu_int(in.alu0, x, s0);
        if (in.alu1 != AluOp::kBypass) {
          x = in.reverse1 ? apply_alu_int(in.alu1, s1, x) : apply_alu_int(in.alu1, x, s1);
        }
      }
      store_row_int(mem, in.dst, p, a);
    }
    return;
  }
  std::vector<float> a;
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    load_row(mem, in.src0, p, a);
    const float s0 = scalar_value(mem, in.operand0, p);
    const float s1 = scalar_value(mem, in.operand1, p);
    // Element-wise, so op0 over the row and then op1 over the row is op1(op0(x)) per element.
    alu_row(in.alu0, in.reverse0, a, [s0](size_t) { return s0; });
    if (in.alu1 != AluOp::kBypass) alu_row(in.alu1, in.reverse1, a, [s1](size_t) { return s1; });
    store_row(mem, in.dst, p, a);
  }
}

void exec_select(const Instruction& in, const MemoryMap& mem) {
  std::vector<float> pred, t, f;
  const bool int_path = all_int({in.dst.dtype, in.src1.dtype}) &&
                        (!in.has_src2 || is_integer(in.src2.dtype)) && imm_is_int32(in.imm);
  std::vector<int64_t> ti, fi;
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    load_row(mem, in.src0, p, pred);
    if (int_path) {
      load_row_int(mem, in.src1, p, ti);
      if (in.has_src2) load_row_int(mem, in.src2, p, fi);
      for (size_t i = 0; i < ti.size(); ++i) {
        if (pred[i] == 0.0f) ti[i] = in.has_src2 ? fi[i] : static_cast<int64_t>(in.imm);
      }
      store_row_int(mem, in.dst, p, ti);
      continue;
    }
    load_row(mem, in.src1, p, t);
    if (in.has_src2) load_row(mem, in.src2, p, f);
    for (size_t i = 0; i < t.size(); ++i) {
      if (pred[i] == 0.0f) t[i] = in.has_src2 ? f[i] : in.imm;
    }
    store_row(mem, in.dst, p, t);
  }
}

}  // namespace neuronsim::device_model::exec
