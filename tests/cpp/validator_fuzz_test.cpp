// Random programs against the validator: it either accepts a program or throws ValidationError
// (never anything else, never UB), and what it accepts only touches memory that exists. A few
// hundred small accepted programs then run on a Device: each completes or deadlocks cleanly.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/device.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/validator.h"
#include "test_util.h"

namespace neuronsim::device_model {
namespace {

using namespace isa;

constexpr int kEngineKinds = 5;

// Random programs: mostly well-formed instructions (so every rule is reachable and programs
// pass), then a few fields replaced by hostile values.
class Gen {
 public:
  Gen(uint64_t seed, const ChipParams& chip, bool small)
      : rng_(seed), core_(chip.core), cap_(chip.hbm.capacity_bytes), small_(small) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  T pick(std::initializer_list<T> xs) {
    return *(xs.begin() + below(xs.size()));
  }

  // ---- hostile values ----
  int64_t wild_i64() {
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    if (chance(0.2)) return static_cast<int64_t>(rng_());
    return pick<int64_t>({0, 1, -1, 2, -2, 7, 64, -64, 512, 4096, 1 << 20, -(1 << 20), INT32_MAX,
                          INT32_MIN, kMax, kMin, kMin + 1, kMax / 2, -(kMax / 3)});
  }
  uint32_t wild_u32() {
    if (chance(0.2)) return static_cast<uint32_t>(rng_());
    return pick<uint32_t>({0,    1,    2,     3,     31,    32,       33,        63,
                           64,   65,   96,    127,   128,   129,      512,       513,
                           4096, 4097, 49152, 65536, 65537, 1u << 31, UINT32_MAX});
  }
  uint64_t wild_offset() {
    if (chance(0.2)) return rng_();
    return pick<uint64_t>({0, 4, 1020, 2048, 2052, 16380, 16384, 196604, 196608, cap_ - 4, cap_,
                           cap_ + 4, 1ull << 62, 1ull << 63, UINT64_MAX - 3, UINT64_MAX});
  }
  int32_t wild_i32() {
    if (chance(0.2)) return static_cast<int32_t>(rng_());
    return pick<int32_t>({0, 1, -1, 2, 3, 100, INT32_MAX, INT32_MIN});
  }

  AccessPattern wild_ap() {
    AccessPattern ap;
    ap.space = static_cast<MemSpace>(below(4));
    ap.dtype = static_cast<DType>(chance(0.9) ? below(9) : below(256));
    ap.start_partition = wild_u32();
    ap.partitions = wild_u32();
    ap.partition_stride = wild_i64();
    ap.offset = wild_offset();
    ap.ndims = static_cast<uint8_t>(chance(0.9) ? below(6) : below(256));
    for (auto& d : ap.dims) d = {wild_i64(), wild_u32()};
    return ap;
  }

  // Replaces one field of one AP with a hostile value, or nudges it just past a limit.
  void mutate_ap(AccessPattern& ap) {
    switch (below(12)) {
      case 0:
        ap.space = static_cast<MemSpace>(below(5));
        break;
      case 1:
        ap.dtype = static_cast<DType>(below(12));
        break;
      case 2:
        ap.start_partition = wild_u32();
        break;
      case 3:
        ap.partitions = wild_u32();
        break;
      case 4:
        ap.partition_stride = wild_i64();
        break;
      case 5:
        ap.offset = wild_offset();
        break;
      case 6:
        ap.ndims = static_cast<uint8_t>(below(7));
        break;
      case 7:
        ap.dims[below(kMaxFreeDims)].stride = wild_i64();
        break;
      case 8:
        ap.dims[below(kMaxFreeDims)].size = wild_u32();
        break;
      case 9:  // unsigned: -4 from 0 wraps to the top of the range, on purpose
        ap.offset += static_cast<uint64_t>(pick<int64_t>({-4, -1, 1, 4, 2048, 4096, 16384}));
        break;
      case 10:
        ap.partitions += pick<uint32_t>({1, 32, 64, UINT32_MAX});
        break;
      default:
        ap.space = MemSpace::kPsum;
        ap.dims[below(kMaxFreeDims)].size += 1;
        break;
    }
  }

  void mutate(Instruction& in) {
    switch (below(16)) {
      case 0:
        in.op = static_cast<Opcode>(below(kOpcodeCount + 3));
        break;
      case 1:
        mutate_ap(in.dst);
        break;
      case 2:
        mutate_ap(in.src0);
        break;
      case 3:
        mutate_ap(in.src1);
        break;
      case 4:
        in.has_src2 = !in.has_src2, mutate_ap(in.src2);
        break;
      case 5:
        in.has_acc_dst = !in.has_acc_dst, mutate_ap(in.acc_dst);
        break;
      case 6:
        in.operand0.from_ap = !in.operand0.from_ap, mutate_ap(in.operand0.ap);
        break;
      case 7:
        in.operand1.from_ap = !in.operand1.from_ap, mutate_ap(in.operand1.ap);
        break;
      case 8:
        in.alu0 = static_cast<AluOp>(below(30));
        break;
      case 9:
        in.alu1 = static_cast<AluOp>(below(30));
        break;
      case 10:
        in.func = static_cast<ActFunc>(below(30));
        break;
      case 11:
        in.reduce = static_cast<ReduceOp>(below(7));
        break;
      case 12:
        in.reduce_axes = static_cast<uint8_t>(chance(0.8) ? below(7) : below(256));
        break;
      case 13:
        in.sem = static_cast<uint16_t>(chance(0.7) ? below(70) : 65535);
        break;
      case 14:
        in.sem_value = wild_i32();
        break;
      default:
        in = wild_instruction();
        break;
    }
  }

  Instruction wild_instruction() {
    Instruction in;
    in.op = static_cast<Opcode>(below(kOpcodeCount + 3));
    in.dst = wild_ap();
    in.src0 = wild_ap();
    in.src1 = wild_ap();
    in.src2 = wild_ap();
    in.has_src2 = chance(0.5);
    in.acc_dst = wild_ap();
    in.has_acc_dst = chance(0.5);
    in.operand0 = {chance(0.5), 1.0f, wild_ap()};
    in.operand1 = {chance(0.5), 1.0f, wild_ap()};
    in.alu0 = static_cast<AluOp>(below(30));
    in.alu1 = static_cast<AluOp>(below(30));
    in.func = static_cast<ActFunc>(below(30));
    in.reduce = static_cast<ReduceOp>(below(6));
    in.reduce_axes = static_cast<uint8_t>(below(7));
    in.sem = static_cast<uint16_t>(below(70));
    in.sem_value = wild_i32();
    return in;
  }

  // Hostile values in the fields an opcode does not read: the validator ignores them, so the
  // device must too.
  void scribble_unused(Instruction& in) {
    const bool reads_src1 =
        in.op == Opcode::kMatmul || in.op == Opcode::kTensorTensor || in.op == Opcode::kSelect;
    const bool reads_operands = in.op == Opcode::kTensorScalar || in.op == Opcode::kActivation;
    if (!reads_src1) in.src1 = wild_ap();
    if (in.op != Opcode::kSelect) in.src2 = wild_ap(), in.has_src2 = chance(0.5);
    if (in.op != Opcode::kActivation) in.acc_dst = wild_ap(), in.has_acc_dst = chance(0.5);
    if (!reads_operands) {
      in.operand0 = {chance(0.5), 2.0f, wild_ap()};
      in.operand1 = {chance(0.5), -1.0f, wild_ap()};
    }
    if (in.is_sync()) in.dst = wild_ap(), in.src0 = wild_ap();
  }

  // ---- well-formed instructions ----
  uint32_t partitions() {
    return small_ ? pick<uint32_t>({1, 2, 8, 16, 32, 33, 64, 128})
                  : pick<uint32_t>({1, 7, 16, 32, 33, 48, 64, 65, 100, 128});
  }
  uint32_t start_for(uint32_t p) {
    if (p > 64) return 0;
    if (p > 32) return pick<uint32_t>({0, 64});
    return static_cast<uint32_t>(32 * below(4));
  }
  DType any_dtype() { return static_cast<DType>(below(9)); }
  DType float_dtype() {
    return pick<DType>(
        {DType::kFp32, DType::kBf16, DType::kFp16, DType::kFp8E4M3, DType::kFp8E5M2});
  }
  DType int_dtype() {
    return pick<DType>({DType::kInt32, DType::kInt16, DType::kInt8, DType::kUint8});
  }
  std::vector<uint32_t> free_sizes(int max_dims) {
    std::vector<uint32_t> s(1 + below(max_dims));
    for (auto& x : s) x = static_cast<uint32_t>(1 + below(small_ ? 6 : 12));
    return s;
  }
  static uint64_t product(const std::vector<uint32_t>& s) {
    uint64_t n = 1;
    for (auto x : s) n *= x;
    return n;
  }

  // An on-chip AP of the given free sizes laid out from byte `base` of each partition: dense,
  // padded, reversed or (for inputs) broadcast.
  AccessPattern onchip(MemSpace space, DType t, uint32_t p, uint32_t start,
                       std::vector<uint32_t> sizes, uint64_t base, bool input,
                       bool may_flatten = true) {
    AccessPattern ap;
    ap.space = space;
    ap.dtype = t;
    ap.start_partition = start;
    ap.partitions = p;
    if (may_flatten && chance(0.3)) sizes = {static_cast<uint32_t>(product(sizes))};
    ap.ndims = static_cast<uint8_t>(sizes.size());
    int64_t stride = 1;
    const int layout = static_cast<int>(below(input ? 4 : 3));
    for (int k = ap.ndims - 1; k >= 0; --k) {
      ap.dims[k] = {stride, sizes[k]};
      stride *= sizes[k] * (layout == 1 ? 2 : 1);
    }
    if (layout == 2) ap.dims[ap.ndims - 1].stride = -1;  // innermost walks backwards
    if (layout == 3) ap.dims[0].stride = 0;              // broadcast the outermost dim
    const auto span = ap.byte_span();                    // offset 0: lo <= 0
    ap.offset = base - static_cast<uint64_t>(span.lo);
    return ap;
  }
  // Byte base of operand slot i: disjoint 16 KiB slots in SBUF, 2 KiB banks in PSUM.
  uint64_t slot(MemSpace s, int i) { return s == MemSpace::kPsum ? 2048 * (i % 8) : 16384 * i; }

  AccessPattern hbm(DType t, uint32_t rows, uint32_t cols, bool input) {
    AccessPattern ap = hbm_rows(t, hbm_base + 4096 * below(small_ ? 64 : 1024), rows, cols, cols);
    if (input && chance(0.2))
      ap.partition_stride = 0;  // broadcast one row
    else if (chance(0.3))
      ap.partition_stride = cols + 3;  // padded rows
    return ap;
  }

  Instruction sem_op() {
    const auto s = static_cast<uint16_t>(below(small_ ? 4 : core_.semaphores));
    return chance(0.5) ? sem_wait(s, static_cast<int32_t>(below(4)))
                       : sem_signal(s, static_cast<int32_t>(1 + below(2)));
  }

  Instruction well_formed(EngineKind e) {
    if (chance(0.15)) return sem_op();
    const uint32_t P = partitions(), st = start_for(P);
    const bool psum_ok = e == EngineKind::kVector || e == EngineKind::kScalar;
    auto space = [&] { return psum_ok && chance(0.2) ? MemSpace::kPsum : MemSpace::kSbuf; };
    auto sizes = free_sizes(4);
    const auto op_for = [&](std::initializer_list<Opcode> ops) { return pick(ops); };
    Opcode op;
    switch (e) {
      case EngineKind::kTensor:
        op = op_for({Opcode::kMatmul, Opcode::kTranspose});
        break;
      case EngineKind::kVector:
        op = op_for({Opcode::kTensorTensor, Opcode::kTensorScalar, Opcode::kTensorReduce,
                     Opcode::kTensorCopy, Opcode::kMemset, Opcode::kSelect, Opcode::kRng});
        break;
      case EngineKind::kScalar:
        op = op_for({Opcode::kActivation, Opcode::kTensorScalar, Opcode::kTensorCopy});
        break;
      case EngineKind::kGpSimd:
        op = op_for({Opcode::kTensorTensor, Opcode::kTensorScalar, Opcode::kTensorReduce,
                     Opcode::kTensorCopy, Opcode::kIota, Opcode::kMemset, Opcode::kSelect,
                     Opcode::kRng});
        break;
      default:
        op = Opcode::kDmaCopy;
        break;
    }
    auto operand = [&](int i, const std::vector<uint32_t>& sz, DType t, bool input) {
      const MemSpace sp = space();
      return onchip(sp, t, P, st, sz, slot(sp, i), input);
    };
    auto column = [&](int i, DType t) {
      return onchip(MemSpace::kSbuf, t, P, st, {1}, slot(MemSpace::kSbuf, i), true);
    };
    auto scalar = [&](int i, DType t) {
      return chance(0.4) ? per_partition(column(i, t)) : imm(static_cast<float>(below(9)) - 4);
    };
    switch (op) {
      case Opcode::kMatmul: {
        const uint32_t M = static_cast<uint32_t>(1 + below(small_ ? 64 : 128));
        const uint32_t N = static_cast<uint32_t>(1 + below(small_ ? 128 : 512));
        DType a = float_dtype(), b = float_dtype();
        if ((a == DType::kFp32) != (b == DType::kFp32)) b = a;
        return matmul(psum_tile(DType::kFp32, M, 2048 * below(8), N),
                      onchip(MemSpace::kSbuf, a, P, st, {M}, 0, true),
                      onchip(MemSpace::kSbuf, b, P, st, {N}, 16384, true), chance(0.5));
      }
      case Opcode::kTranspose: {
        const uint32_t F = static_cast<uint32_t>(1 + below(small_ ? 64 : 128));
        const DType t = float_dtype();
        return transpose(psum_tile(chance(0.5) ? DType::kFp32 : t, F, 2048 * below(8), P),
                         onchip(MemSpace::kSbuf, t, P, st, {F}, 0, true));
      }
      case Opcode::kActivation: {
        Instruction in = activation(
            operand(0, sizes, any_dtype(), false), operand(1, sizes, any_dtype(), true),
            static_cast<ActFunc>(below(22)), scalar(2, float_dtype()), scalar(3, any_dtype()));
        if (chance(0.3)) {
          in.has_acc_dst = true;
          in.acc_dst = column(4, any_dtype());
        }
        return in;
      }
      case Opcode::kTensorTensor: {
        const bool ints = chance(0.4);
        const DType a = ints ? int_dtype() : any_dtype(), b = ints ? int_dtype() : any_dtype();
        AccessPattern s0 = operand(1, sizes, a, true), s1 = operand(2, sizes, b, true);
        if (s0.space == MemSpace::kPsum && s1.space == MemSpace::kPsum) {
          s1 = onchip(MemSpace::kSbuf, b, P, st, sizes, slot(MemSpace::kSbuf, 2), true);
        }
        AluOp alu = static_cast<AluOp>(1 + below(23));
        if (alu_op_is_bitwise(alu) && !(is_integer(a) && is_integer(b))) alu = AluOp::kAdd;
        return tensor_tensor(operand(0, sizes, any_dtype(), false), s0, s1, alu);
      }
      case Opcode::kTensorScalar: {
        const DType src = chance(0.4) ? int_dtype() : any_dtype();
        Instruction in =
            tensor_scalar(operand(0, sizes, any_dtype(), false), operand(1, sizes, src, true),
                          static_cast<AluOp>(below(19)), scalar(2, any_dtype()),
                          static_cast<AluOp>(below(19)), scalar(3, any_dtype()));
        in.reverse0 = chance(0.5);
        in.reverse1 = chance(0.5);
        if (is_integer(src) && chance(0.5)) {
          in.alu1 = pick<AluOp>({AluOp::kBitwiseAnd, AluOp::kShiftLeft, AluOp::kShiftRight});
          in.operand1 = chance(0.5) ? per_partition(column(3, int_dtype())) : imm(3);
        }
        return in;
      }
      case Opcode::kTensorReduce: {
        const auto axes = static_cast<uint8_t>(1 + below(sizes.size()));
        std::vector<uint32_t> outer;
        for (size_t k = 0; k + axes < sizes.size(); ++k) outer.push_back(sizes[k]);
        if (outer.empty()) outer = {1};
        // reduce_axes counts src dims: no flattening.
        const MemSpace sp = space();
        const AccessPattern src = onchip(sp, any_dtype(), P, st, sizes, slot(sp, 1), true, false);
        return tensor_reduce(operand(0, outer, any_dtype(), false), src,
                             static_cast<ReduceOp>(below(4)), axes);
      }
      case Opcode::kTensorCopy:
        return tensor_copy(operand(0, sizes, any_dtype(), false),
                           operand(1, sizes, any_dtype(), true));
      case Opcode::kIota: {
        Instruction in = iota(operand(0, sizes, any_dtype(), false), wild_i32(), wild_i32(), {});
        for (auto& s : in.iota_steps) s = chance(0.5) ? static_cast<int32_t>(below(5)) : wild_i32();
        return in;
      }
      case Opcode::kMemset:
        return memset(operand(0, sizes, any_dtype(), false), static_cast<float>(below(100)) - 50);
      case Opcode::kRng: {
        // Bounds include fractions, inverted ranges and non-finite values.
        auto bound = [&] {
          return pick<float>({-8, 0, 0.5f, 0.9f, -0.5f, 3, 8, 1e30f, -1e30f, 3e9f,
                              std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN()});
        };
        return rng(operand(0, sizes, any_dtype(), false), static_cast<RngDist>(below(3)), bound(),
                   bound(), rng_(), rng_(), rng_());
      }
      case Opcode::kSelect: {
        const AccessPattern d = operand(0, sizes, any_dtype(), false);
        const AccessPattern pred = operand(1, sizes, any_dtype(), true);
        const AccessPattern t = operand(2, sizes, any_dtype(), true);
        return chance(0.5) ? select(d, pred, t, operand(3, sizes, any_dtype(), true))
                           : select(d, pred, t, static_cast<float>(below(7)));
      }
      default: {
        const uint64_t F = product(sizes);
        const DType a = any_dtype(), b = chance(0.7) ? a : any_dtype();
        const auto fsz = std::vector<uint32_t>{static_cast<uint32_t>(F)};
        // The partition of a DMA is any row: no start alignment.
        const uint32_t start = static_cast<uint32_t>(below(129 - P));
        auto sb = [&](DType t, int i, bool input) {
          return onchip(MemSpace::kSbuf, t, P, start, sizes, slot(MemSpace::kSbuf, i), input);
        };
        switch (below(4)) {
          case 0:
            return dma_copy(sb(a, 0, false), hbm(b, P, static_cast<uint32_t>(F), true));
          case 1:
            return dma_copy(hbm(a, P, static_cast<uint32_t>(F), false), sb(b, 1, true));
          case 2:
            return dma_copy(sb(a, 2, false), sb(b, 3, true));
          default: {
            // Reshape: [1, P*F] <- [P, F].
            return dma_copy(hbm(a, 1, static_cast<uint32_t>(P * F), false),
                            onchip(MemSpace::kSbuf, b, P, start, fsz, 16384 * 4, true));
          }
        }
      }
    }
  }

  uint64_t hbm_base = 0;  // well-formed HBM operands start here

  Program program(int max_streams, int max_instructions, int max_mutations) {
    Program p;
    p.name = "fuzz";
    const int n_streams = static_cast<int>(1 + below(max_streams));
    for (int s = 0; s < n_streams; ++s) {
      StreamId id{static_cast<EngineKind>(below(kEngineKinds)), 0};
      if (id.engine == EngineKind::kDma) id.queue = static_cast<uint8_t>(below(small_ ? 4 : 16));
      Stream& stream = p.stream(id);  // the same engine twice extends one stream
      const int n = static_cast<int>(below(max_instructions + 1));
      for (int i = 0; i < n; ++i) stream.instructions.push_back(well_formed(id.engine));
    }
    const int mutations = static_cast<int>(below(max_mutations + 1));
    for (int m = 0; m < mutations; ++m) {
      Stream& s = p.streams[below(p.streams.size())];
      if (chance(0.1)) {
        // The stream itself: unknown engines, queues beyond the limit, queues on compute engines.
        s.id.engine = static_cast<EngineKind>(below(kEngineKinds + 2));
        s.id.queue = static_cast<uint8_t>(chance(0.5) ? below(20) : below(256));
      } else if (chance(0.05)) {
        p.streams.push_back(s);  // a duplicate
      } else if (!s.instructions.empty()) {
        mutate(s.instructions[below(s.instructions.size())]);
      }
    }
    return p;
  }

 private:
  std::mt19937_64 rng_;
  const CoreParams& core_;
  uint64_t cap_;
  bool small_;
};

// Independent of AccessPattern::byte_span: the lowest and highest element addresses of an AP
// are at corners of its index box (the address is linear in the indices), computed in 128 bits.
void expect_in_bounds(const AccessPattern& ap, const CoreParams& core, uint64_t cap,
                      const std::string& where) {
  ASSERT_LE(ap.ndims, kMaxFreeDims) << where;
  const __int128 es = static_cast<__int128>(dtype_size(ap.dtype));
  ASSERT_GT(es, 0) << where;
  __int128 lo = 0, hi = 0;
  auto corner = [&](int64_t stride, uint32_t size) {
    const __int128 r = static_cast<__int128>(stride) * (static_cast<__int128>(size) - 1);
    (r < 0 ? lo : hi) += r;
  };
  for (int k = 0; k < ap.ndims; ++k) corner(ap.dims[k].stride, ap.dims[k].size);
  if (ap.space == MemSpace::kHbm) corner(ap.partition_stride, ap.partitions);
  const __int128 first = static_cast<__int128>(ap.offset) + lo * es;
  const __int128 end = static_cast<__int128>(ap.offset) + hi * es + es;
  __int128 limit;
  if (ap.space == MemSpace::kHbm) {
    limit = cap;
  } else {
    const bool sb = ap.space == MemSpace::kSbuf;
    ASSERT_TRUE(sb || ap.space == MemSpace::kPsum) << where;
    ASSERT_LE(uint64_t{ap.start_partition} + ap.partitions,
              sb ? core.sbuf.partitions : core.psum.partitions)
        << where;
    limit = sb ? core.sbuf.partition_bytes : core.psum.partition_bytes;
  }
  EXPECT_GE(first, 0) << where << " " << ap.to_string();
  EXPECT_LE(end, limit) << where << " " << ap.to_string();
}

// Every AP the executor reads or writes for an accepted instruction (an opcode not listed here
// is assumed to write dst only).
std::vector<const AccessPattern*> accessed(const Instruction& in) {
  std::vector<const AccessPattern*> v;
  if (in.is_sync()) return v;
  v.push_back(&in.dst);
  switch (in.op) {
    case Opcode::kMatmul:
    case Opcode::kTensorTensor:
      v.push_back(&in.src0), v.push_back(&in.src1);
      break;
    case Opcode::kSelect:
      v.push_back(&in.src0), v.push_back(&in.src1);
      if (in.has_src2) v.push_back(&in.src2);
      break;
    case Opcode::kActivation:
      if (in.has_acc_dst) v.push_back(&in.acc_dst);
      [[fallthrough]];
    case Opcode::kTensorScalar:
      if (in.operand0.from_ap) v.push_back(&in.operand0.ap);
      if (in.operand1.from_ap) v.push_back(&in.operand1.ap);
      [[fallthrough]];
    case Opcode::kTranspose:
    case Opcode::kTensorReduce:
    case Opcode::kTensorCopy:
    case Opcode::kDmaCopy:
      v.push_back(&in.src0);
      break;
    default:
      break;
  }
  return v;
}

bool stream_named(const Program& p, const std::string& name) {
  for (const auto& s : p.streams) {
    if (s.id.name() == name) return true;
  }
  return false;
}

TEST(ValidatorFuzz, ValidateOnlyNeverCrashes) {
  const ChipParams chip = parse_chip_params(Config::load("trn1"));
  const ValidationContext vc{&chip.core, chip.hbm.capacity_bytes, {}};
  std::set<std::string> listed;
  for (auto r : validation_rules()) listed.insert(std::string(r));
  std::map<std::string, int> hits;
  int passed = 0;
  constexpr int kPrograms = 20000;
  for (int i = 0; i < kPrograms; ++i) {
    const uint64_t seed = 0x5eed0000u + i;
    Gen g(seed, chip, false);
    const Program p = g.program(4, 5, i % 4);
    try {
      validate(p, vc);
    } catch (const ValidationError& e) {
      ++hits[e.rule()];
      ASSERT_TRUE(listed.count(e.rule())) << "seed " << seed << ": unlisted rule " << e.rule();
      const std::string what = e.what();
      ASSERT_NE(what.find("rule '" + e.rule() + "'"), std::string::npos) << what;
      ASSERT_TRUE(stream_named(p, e.stream())) << "seed " << seed << ": " << what;
      ASSERT_GE(e.instruction_index(), -1) << what;
      continue;
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": validate threw something else: " << e.what();
    } catch (...) {
      FAIL() << "seed " << seed << ": validate threw a non-exception";
    }
    ++passed;
    for (const Stream& s : p.streams) {
      ASSERT_LE(static_cast<int>(s.id.engine), static_cast<int>(EngineKind::kDma));
      if (s.id.engine != EngineKind::kDma) {
        ASSERT_EQ(s.id.queue, 0);
      }
      ASSERT_LT(s.id.queue, chip.core.dma.queues);
      for (size_t k = 0; k < s.instructions.size(); ++k) {
        const Instruction& in = s.instructions[k];
        const std::string where = "seed " + std::to_string(seed) + " " + s.id.name() + "[" +
                                  std::to_string(k) + "] " + std::string(opcode_name(in.op));
        ASSERT_LT(static_cast<int>(in.op), kOpcodeCount) << where;
        ASSERT_TRUE(engine_supports(s.id.engine, in.op)) << where;
        if (in.is_sync()) {
          ASSERT_LT(in.sem, chip.core.semaphores) << where;
        }
        for (const AccessPattern* ap : accessed(in))
          expect_in_bounds(*ap, chip.core, vc.hbm_capacity, where);
        if (HasFailure()) return;
      }
    }
  }
  // The generator must reach both sides: accepted programs and most of the rules.
  std::string summary;
  for (const auto& [rule, n] : hits) summary += rule + "=" + std::to_string(n) + " ";
  RecordProperty("rules_hit", summary);
  EXPECT_GT(passed, kPrograms / 10) << summary;
  EXPECT_GE(hits.size(), validation_rules().size() * 3 / 4) << summary;
}

// The validator is the only guard in front of the executor: with an allocator view every HBM
// range it accepts is inside an allocation.
TEST(ValidatorFuzz, HbmRangeCheckIsConsulted) {
  const ChipParams chip = parse_chip_params(Config::load("trn1"));
  const uint64_t lo = 1 << 20, hi = lo + (1 << 16);
  const ValidationContext vc{&chip.core, chip.hbm.capacity_bytes,
                             [&](uint64_t a, uint64_t n) { return a >= lo && a + n <= hi; }};
  int accepted_hbm = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    Gen g(0xd3a0000u + i, chip, true);
    g.hbm_base = lo;
    const Program p = g.program(2, 3, 0);
    try {
      validate(p, vc);
    } catch (const ValidationError& e) {
      rejected += e.rule() == "hbm-bounds";  // other rejections: rng bounds
      continue;
    }
    for (const Stream& s : p.streams) {
      for (const Instruction& in : s.instructions) {
        for (const AccessPattern* ap : accessed(in)) {
          if (ap->space != MemSpace::kHbm) continue;
          ++accepted_hbm;
          const auto span = ap->byte_span();
          ASSERT_GE(span.lo, static_cast<int64_t>(lo)) << ap->to_string();
          ASSERT_LE(span.hi, static_cast<int64_t>(hi)) << ap->to_string();
        }
      }
    }
  }
  EXPECT_GT(accepted_hbm, 20);
  EXPECT_GT(rejected, 100);
}

// Writes 3.5 to HBM at `address` through SBUF and reads it back: the device still works.
void expect_device_usable(Device& dev, uint64_t address) {
  float* host = reinterpret_cast<float*>(dev.hbm_data() + address);
  for (int i = 0; i < 32; ++i) host[i] = 0.0f;
  Program p;
  p.name = "usable";
  p.stream({EngineKind::kVector, 0}).instructions = {memset(sbuf_tile(DType::kFp32, 4, 0, 8), 3.5f),
                                                     sem_signal(0)};
  p.stream({EngineKind::kDma, 0}).instructions = {
      sem_wait(0, 1),
      dma_copy(hbm_rows(DType::kFp32, address, 4, 8, 8), sbuf_tile(DType::kFp32, 4, 0, 8))};
  ASSERT_NO_THROW(dev.run(0, p));
  for (int i = 0; i < 32; ++i) ASSERT_EQ(host[i], 3.5f) << i;
}

// A valid program whose bitwise step sees NaN and inf from a float step before it (an int column
// divided by a float zero): defined results, not an undefined float -> int cast.
void expect_bitwise_after_nan_defined(Device& dev, uint64_t address) {
  const DType F32 = DType::kFp32, I32 = DType::kInt32;
  Program p;
  p.name = "bitwise after nan";
  p.stream({EngineKind::kGpSimd, 0}).instructions = {iota(sbuf_tile(I32, 1, 0, 4), 0, 0, {1}),
                                                     sem_signal(0)};
  p.stream({EngineKind::kVector, 0}).instructions = {
      memset(sbuf_tile(F32, 1, 64, 1), 0.0f), sem_wait(0, 1),
      tensor_scalar(sbuf_tile(F32, 1, 128, 4), sbuf_tile(I32, 1, 0, 4), AluOp::kDivide,
                    per_partition(sbuf_tile(F32, 1, 64, 1)), AluOp::kShiftLeft, imm(3)),
      sem_signal(1)};
  p.stream({EngineKind::kDma, 0}).instructions = {
      sem_wait(1, 1), dma_copy(hbm_rows(F32, address, 1, 4, 4), sbuf_tile(F32, 1, 128, 4))};
  ASSERT_NO_THROW(dev.run(0, p));
  const float* out = reinterpret_cast<const float*>(dev.hbm_data() + address);
  EXPECT_EQ(out[0], 0.0f);  // 0 / 0 = NaN -> 0
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(out[i])) << i;
}

TEST(ValidatorFuzz, AcceptedProgramsRunOrDeadlockOnDevice) {
  auto dev = testing::make_device("trn1", {}, ExecMode::kFull, 1);
  const ChipParams& chip = dev->params();
  const ValidationContext vc{&chip.core, dev->hbm_capacity(), {}};
  constexpr uint64_t kCheckAddress = 8 << 20;  // the generator stays below 4 MiB
  expect_bitwise_after_nan_defined(*dev, kCheckAddress);
  int completed = 0, deadlocked = 0, invalid = 0;
  for (int i = 0; i < 400; ++i) {
    const uint64_t seed = 0xc0de0000u + i;
    Gen g(seed, chip, true);
    Program p = g.program(4, 4, 0);
    for (auto& s : p.streams) {
      for (auto& in : s.instructions) {
        if (g.chance(0.3)) g.scribble_unused(in);
      }
    }
    try {
      validate(p, vc);
    } catch (const ValidationError&) {
      ++invalid;
      continue;
    }
    try {
      dev->run(0, p);
      ++completed;
    } catch (const DeadlockError& e) {
      ++deadlocked;
      EXPECT_NE(std::string(e.what()).find("semaphore"), std::string::npos) << e.what();
      expect_device_usable(*dev, kCheckAddress);
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ": " << e.what();
    }
    if (HasFailure()) return;
  }
  expect_device_usable(*dev, kCheckAddress);
  RecordProperty("completed", completed);
  RecordProperty("deadlocked", deadlocked);
  EXPECT_GE(completed + deadlocked, 300) << "invalid " << invalid;
  EXPECT_GT(completed, 50);
  EXPECT_GT(deadlocked, 10);
}

}  // namespace
}  // namespace neuronsim::device_model
