// Function of each opcode. Data moves partition by partition through fp32 (or int64 for the
// exact integer path) row buffers, which keeps every opcode a few lines over one iterator.
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "neuronsim/device/executor.h"
#include "neuronsim/device/philox.h"

namespace neuronsim::device {
namespace {

// Visits the free elements of partition p of an AP: fn(pointer, index).
template <typename Fn>
void for_each_in_partition(const MemoryMap& mem, const AccessPattern& ap, uint32_t p, Fn&& fn) {
  AccessPattern one = ap;
  one.partitions = 1;
  if (ap.space == MemSpace::kHbm) {
    one.offset = static_cast<uint64_t>(static_cast<int64_t>(ap.offset) +
                                       static_cast<int64_t>(p) * ap.partition_stride *
                                           static_cast<int64_t>(dtype_size(ap.dtype)));
  }
  const uint32_t phys = ap.space == MemSpace::kHbm ? 0 : p;
  for_each_element(
      one, [&](int64_t addr, uint32_t, uint64_t idx) { fn(mem.element(ap, phys, addr), idx); });
}

// The first free element of partition p when the free elements are contiguous (element i at
// + i * dtype_size, the order for_each_in_partition visits them), else null: row loops over such
// a pattern need no per-element address arithmetic.
uint8_t* contiguous_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p) {
  if (!ap.free_contiguous()) return nullptr;
  if (ap.space == MemSpace::kHbm) {
    const int64_t es = static_cast<int64_t>(dtype_size(ap.dtype));
    return mem.element(
        ap, 0,
        static_cast<int64_t>(ap.offset) + static_cast<int64_t>(p) * ap.partition_stride * es);
  }
  return mem.element(ap, p, static_cast<int64_t>(ap.offset));
}

void load_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p, std::vector<float>& out) {
  out.resize(ap.free_elements());
  if (const uint8_t* src = contiguous_row(mem, ap, p)) {
    if (ap.dtype == DType::kFp32) {
      std::memcpy(out.data(), src, out.size() * 4);
      return;
    }
    if (ap.dtype == DType::kBf16) {  // the upper half of an fp32, as bf16_bits_to_float reads it
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
      }
      return;
    }
    const size_t es = dtype_size(ap.dtype);
    for (size_t i = 0; i < out.size(); ++i) out[i] = load_float(src + i * es, ap.dtype);
    return;
  }
  for_each_in_partition(mem, ap, p,
                        [&](const uint8_t* e, uint64_t i) { out[i] = load_float(e, ap.dtype); });
}

void store_row(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
               const std::vector<float>& in) {
  if (uint8_t* dst = contiguous_row(mem, ap, p)) {
    if (ap.dtype == DType::kFp32) {
      std::memcpy(dst, in.data(), in.size() * 4);
      return;
    }
    const size_t es = dtype_size(ap.dtype);
    for (size_t i = 0; i < in.size(); ++i) store_float(dst + i * es, ap.dtype, in[i]);
    return;
  }
  for_each_in_partition(mem, ap, p,
                        [&](uint8_t* e, uint64_t i) { store_float(e, ap.dtype, in[i]); });
}

void load_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                  std::vector<int64_t>& out) {
  out.resize(ap.free_elements());
  for_each_in_partition(mem, ap, p,
                        [&](const uint8_t* e, uint64_t i) { out[i] = load_int(e, ap.dtype); });
}

void store_row_int(const MemoryMap& mem, const AccessPattern& ap, uint32_t p,
                   const std::vector<int64_t>& in) {
  for_each_in_partition(mem, ap, p, [&](uint8_t* e, uint64_t i) { store_int(e, ap.dtype, in[i]); });
}

// A scalar operand's value for partition p.
float scalar_value(const MemoryMap& mem, const ScalarOperand& s, uint32_t p) {
  if (!s.from_ap) return s.imm;
  float v = 0;
  for_each_in_partition(mem, s.ap, p, [&](const uint8_t* e, uint64_t i) {
    if (i == 0) v = load_float(e, s.ap.dtype);
  });
  return v;
}
int64_t scalar_value_int(const MemoryMap& mem, const ScalarOperand& s, uint32_t p) {
  if (!s.from_ap) return static_cast<int64_t>(s.imm);
  int64_t v = 0;
  for_each_in_partition(mem, s.ap, p, [&](const uint8_t* e, uint64_t i) {
    if (i == 0) v = load_int(e, s.ap.dtype);
  });
  return v;
}

// An immediate joins exact integer math only as an int32 value; fractions, inf, NaN and values
// beyond int32 take the fp32 path (casting them to an integer would be undefined or wrong).
bool imm_is_int32(float v) {
  return std::trunc(v) == v && v >= -2147483648.0f && v < 2147483648.0f;
}

bool scalar_is_int(const ScalarOperand& s) {
  return s.from_ap ? is_integer(s.ap.dtype) : imm_is_int32(s.imm);
}

// Eight fp32 lanes (GCC/Clang vector extension): lane-wise IEEE adds and multiplies, exactly the
// scalar operations (-ffp-contract=off: never fused).
// (Loaded and stored with memcpy in place: no function takes or returns one, which would depend
// on the vector ABI.)
typedef float Float8 __attribute__((vector_size(32)));

// An AVX2 build of the kernel next to the baseline one, picked at load time (x86-64 only).
#if defined(__x86_64__)
#define NEURONSIM_MATMUL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NEURONSIM_MATMUL_CLONES
#endif

// res[m, n] = sum_k st[m, k] * mv[k, n] (st is M x K, mv is K x N, res is M x N, row-major):
// every product rounded to fp32, the sum accumulated from 0 in k order in fp32. Blocks of 4 rows
// x 8 columns keep their sums in registers; the result is the same as one row at a time.
NEURONSIM_MATMUL_CLONES void matmul_kernel(const float* st, const float* mv, float* res, uint32_t M,
                                           uint32_t K, uint32_t N) {
  const size_t k_len = K, n_len = N;
  auto row_tail = [&](uint32_t m, uint32_t n_begin) {  // one row, columns [n_begin, N)
    const float* a = st + m * k_len;
    uint32_t n = n_begin;
    for (; n + 8 <= N; n += 8) {
      Float8 acc = {}, b;
      for (uint32_t k = 0; k < K; ++k) {
        std::memcpy(&b, mv + k * n_len + n, sizeof b);
        acc = acc + a[k] * b;
      }
      std::memcpy(res + m * n_len + n, &acc, sizeof acc);
    }
    for (; n < N; ++n) {
      float acc = 0.0f;
      for (uint32_t k = 0; k < K; ++k) acc = acc + a[k] * mv[k * n_len + n];
      res[m * n_len + n] = acc;
    }
  };
  uint32_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const float* a0 = st + m * k_len;
    const float* a1 = a0 + k_len;
    const float* a2 = a1 + k_len;
    const float* a3 = a2 + k_len;
    uint32_t n = 0;
    for (; n + 8 <= N; n += 8) {
      Float8 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {}, b;
      for (uint32_t k = 0; k < K; ++k) {
        std::memcpy(&b, mv + k * n_len + n, sizeof b);
        acc0 = acc0 + a0[k] * b;
        acc1 = acc1 + a1[k] * b;
        acc2 = acc2 + a2[k] * b;
        acc3 = acc3 + a3[k] * b;
      }
      std::memcpy(res + m * n_len + n, &acc0, sizeof acc0);
      std::memcpy(res + (m + 1) * n_len + n, &acc1, sizeof acc1);
      std::memcpy(res + (m + 2) * n_len + n, &acc2, sizeof acc2);
      std::memcpy(res + (m + 3) * n_len + n, &acc3, sizeof acc3);
    }
    for (uint32_t r = 0; r < 4; ++r) row_tail(m + r, n);
  }
  for (; m < M; ++m) row_tail(m, 0);
}

void exec_matmul(const Instruction& in, const MemoryMap& mem) {
  // dst[m, n] (+)= sum_k stationary[k, m] * moving[k, n]; each product rounded to fp32 and summed
  // in k order in fp32, then added to PSUM in fp32.
  const uint32_t K = in.src0.partitions;
  const uint32_t M = static_cast<uint32_t>(in.src0.free_elements());
  const uint32_t N = static_cast<uint32_t>(in.src1.free_elements());
  std::vector<float> stat_t(static_cast<size_t>(M) * K), mov(static_cast<size_t>(K) * N), row;
  for (uint32_t k = 0; k < K; ++k) {
    load_row(mem, in.src0, k, row);
    for (uint32_t m = 0; m < M; ++m) stat_t[static_cast<size_t>(m) * K + k] = row[m];
    load_row(mem, in.src1, k, row);
    std::memcpy(&mov[static_cast<size_t>(k) * N], row.data(), N * sizeof(float));
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

void exec_activation(const Instruction& in, const MemoryMap& mem) {
  std::vector<float> row;
  for (uint32_t p = 0; p < in.src0.partitions; ++p) {
    load_row(mem, in.src0, p, row);
    const float scale = scalar_value(mem, in.operand0, p);
    const float bias = scalar_value(mem, in.operand1, p);
    float sum = 0.0f;
    for (size_t i = 0; i < row.size(); ++i) {
      row[i] = apply_activation(in.func, row[i] * scale + bias);
      sum = i == 0 ? row[i] : sum + row[i];
    }
    store_row(mem, in.dst, p, row);
    if (in.has_acc_dst) store_row(mem, in.acc_dst, p, std::vector<float>{sum});
  }
}

bool all_int(std::initializer_list<DType> ts) {
  for (DType t : ts) {
    if (!is_integer(t)) return false;
  }
  return true;
}

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

// Same dtype: raw. Integer to integer (tensor_copy, `int_exact`): exact, wrapping when narrowing.
// Otherwise through fp32, as DMA casts always are.
void exec_copy(const AccessPattern& dst, const AccessPattern& src, const MemoryMap& mem,
               bool int_exact) {
  if (dst.dtype == src.dtype) {  // raw element copy: exact for every type
    const size_t es = dtype_size(src.dtype);
    std::vector<uint8_t> row;
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      uint8_t* d = contiguous_row(mem, dst, p);
      const uint8_t* s = contiguous_row(mem, src, p);
      if (d && s) {  // memmove: the row is read before it is written, as below
        std::memmove(d, s, src.free_elements() * es);
        continue;
      }
      row.resize(src.free_elements() * es);
      for_each_in_partition(
          mem, src, p, [&](const uint8_t* e, uint64_t i) { std::memcpy(&row[i * es], e, es); });
      for_each_in_partition(mem, dst, p,
                            [&](uint8_t* e, uint64_t i) { std::memcpy(e, &row[i * es], es); });
    }
    return;
  }
  if (int_exact && all_int({dst.dtype, src.dtype})) {
    std::vector<int64_t> a;
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      load_row_int(mem, src, p, a);
      store_row_int(mem, dst, p, a);
    }
    return;
  }
  std::vector<float> a;
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    load_row(mem, src, p, a);
    store_row(mem, dst, p, a);
  }
}

void exec_iota(const Instruction& in, const MemoryMap& mem) {
  const AccessPattern& d = in.dst;
  std::array<uint32_t, kMaxFreeDims> size{1, 1, 1, 1};
  std::array<int32_t, kMaxFreeDims> step{0, 0, 0, 0};
  // Align the dst's dims to the innermost positions of a 4-D index.
  for (int k = 0; k < d.ndims; ++k) {
    size[kMaxFreeDims - d.ndims + k] = d.dims[k].size;
    step[kMaxFreeDims - d.ndims + k] = in.iota_steps[k];
  }
  std::vector<int64_t> row(d.free_elements());
  for (uint32_t p = 0; p < d.partitions; ++p) {
    size_t i = 0;
    for (uint32_t a = 0; a < size[0]; ++a)
      for (uint32_t b = 0; b < size[1]; ++b)
        for (uint32_t c = 0; c < size[2]; ++c)
          for (uint32_t e = 0; e < size[3]; ++e) {
            int64_t v = static_cast<int64_t>(in.iota_base) +
                        static_cast<int64_t>(p) * in.iota_channel_multiplier +
                        static_cast<int64_t>(a) * step[0] + static_cast<int64_t>(b) * step[1] +
                        static_cast<int64_t>(c) * step[2] + static_cast<int64_t>(e) * step[3];
            row[i++] = static_cast<int32_t>(static_cast<uint32_t>(v));  // int32 math
          }
    store_row_int(mem, d, p, row);
  }
}

// Element e of the destination (row-major, partition-major) draws Philox word
// (rng_base + e) of the stream (seed, offset): the same stream the host kernels draw.
void exec_rng(const Instruction& in, const MemoryMap& mem) {
  const AccessPattern& d = in.dst;
  const uint64_t per_p = d.free_elements();
  std::vector<float> row(per_p);
  std::vector<int64_t> irow(per_p);
  for (uint32_t p = 0; p < d.partitions; ++p) {
    for (uint64_t f = 0; f < per_p; ++f) {
      const uint64_t i = in.rng_base + p * per_p + f;
      switch (in.rng_dist) {
        case RngDist::kUniform:
          row[f] = in.imm + (in.imm2 - in.imm) * philox::uniform(in.rng_seed, in.rng_offset, i);
          break;
        case RngDist::kNormal:
          row[f] = in.imm + in.imm2 * philox::normal(in.rng_seed, in.rng_offset, i);
          break;
        case RngDist::kInteger: {
          const uint64_t range =
              static_cast<uint64_t>(static_cast<int64_t>(in.imm2) - static_cast<int64_t>(in.imm));
          irow[f] = static_cast<int64_t>(in.imm) +
                    static_cast<int64_t>(philox::bits(in.rng_seed, in.rng_offset, i) % range);
          break;
        }
      }
    }
    if (in.rng_dist == RngDist::kInteger)
      store_row_int(mem, d, p, irow);
    else
      store_row(mem, d, p, row);
  }
}

void exec_memset(const Instruction& in, const MemoryMap& mem) {
  unsigned char v[4];
  store_float(v, in.dst.dtype, in.imm);
  const size_t es = dtype_size(in.dst.dtype);
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    for_each_in_partition(mem, in.dst, p, [&](uint8_t* e, uint64_t) { std::memcpy(e, v, es); });
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

void exec_dma(const Instruction& in, const MemoryMap& mem) {
  // Element order is row-major over each AP; the two patterns may have different shapes.
  const AccessPattern& s = in.src0;
  const AccessPattern& d = in.dst;
  const size_t ses = dtype_size(s.dtype), des = dtype_size(d.dtype);
  if (s.partitions == d.partitions && s.free_elements() == d.free_elements()) {
    exec_copy(d, s, mem, /*int_exact=*/false);
    return;
  }
  std::vector<uint8_t> flat(s.elements() * ses);
  for_each_element(s, [&](int64_t addr, uint32_t p, uint64_t i) {
    std::memcpy(&flat[(p * s.free_elements() + i) * ses], mem.element(s, p, addr), ses);
  });
  for_each_element(d, [&](int64_t addr, uint32_t p, uint64_t i) {
    const uint8_t* e = &flat[(p * d.free_elements() + i) * ses];
    uint8_t* out = mem.element(d, p, addr);
    if (s.dtype == d.dtype)
      std::memcpy(out, e, des);
    else
      store_float(out, d.dtype, load_float(e, s.dtype));  // DMA casts go src -> fp32 -> dst
  });
}

}  // namespace

void execute(const Instruction& in, const MemoryMap& mem) {
  switch (in.op) {
    case Opcode::kMatmul:
      exec_matmul(in, mem);
      return;
    case Opcode::kTranspose:
      exec_transpose(in, mem);
      return;
    case Opcode::kActivation:
      exec_activation(in, mem);
      return;
    case Opcode::kTensorTensor:
      exec_tensor_tensor(in, mem);
      return;
    case Opcode::kTensorScalar:
      exec_tensor_scalar(in, mem);
      return;
    case Opcode::kTensorReduce:
      exec_tensor_reduce(in, mem);
      return;
    case Opcode::kTensorCopy:
      exec_copy(in.dst, in.src0, mem, /*int_exact=*/true);
      return;
    case Opcode::kIota:
      exec_iota(in, mem);
      return;
    case Opcode::kMemset:
      exec_memset(in, mem);
      return;
    case Opcode::kRng:
      exec_rng(in, mem);
      return;
    case Opcode::kSelect:
      exec_select(in, mem);
      return;
    case Opcode::kDmaCopy:
      exec_dma(in, mem);
      return;
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
      return;
  }
}

}  // namespace neuronsim::device
