#include "neuronsim/device_model/validator.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"

// An AP formats as AccessPattern::to_string(), so a failure detail can name it without building the
// string for every check that passes.
template <>
struct fmt::formatter<neuronsim::device_model::AccessPattern> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const neuronsim::device_model::AccessPattern& ap, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(ap.to_string(), ctx);
  }
};

namespace neuronsim::device_model {
namespace {

const std::vector<std::string_view> kRules = {
    "stream-id",         // unknown engine code, or a queue index on a compute-engine stream
                         // (the device runs neither: their instructions would be dropped)
    "stream-duplicate",  // two streams with the same engine/queue
    "dma-queue-range",   // DMA queue index >= dma.queues
    "engine-opcode",     // opcode not executable on this engine
    "semaphore-range",   // semaphore index >= semaphores.count
    "semaphore-value",   // negative wait target or non-positive signal increment
    "grid",              // a launch over more physical cores than the logical core has, or a
                         // stream of a program instance beyond the grid
    "semaphore-pcore",   // a signal to a program instance outside the grid, or a wait with one
    "ap-shape",          // > 4 free dims, a zero size, zero partitions, > 2^63 bytes
    "partition-range",   // SBUF/PSUM partitions beyond the memory
    "partition-start-alignment",  // ARCH-v2 start rules for compute engines
    "sbuf-bounds",                // bytes outside a partition of SBUF
    "psum-bounds",                // bytes outside a partition of PSUM
    "hbm-bounds",                 // bytes outside HBM or outside every live allocation/region
    "memory-space",               // an engine reading/writing a memory it cannot access
    "dtype-support",              // a data type the instruction does not accept
    "shape-mismatch",             // operand shapes that do not line up
    "matmul-contraction",         // K > PE rows or stationary/moving K differ
    "matmul-stationary-size",     // stationary free size > PE columns
    "matmul-moving-size",         // moving free size > tensor.moving_free_max
    "psum-bank",                  // matmul output crossing a PSUM bank
    "free-size-limit",            // VectorE free size beyond 64K (SBUF) / 4K (PSUM)
    "both-inputs-psum",           // tensor_tensor with both inputs in PSUM
    "scalar-operand-shape",       // per-partition operand not [P, 1] matching the data
    "reduce-axes",                // tensor_reduce axes outside 1..ndims
    "alu-op",                     // operator not allowed for the opcode or the operand types
    "activation-function",        // activation function code out of range
};

constexpr size_t kPrefetchAhead = 4;
void prefetch_instruction(const Instruction& in) {
  const char* p = reinterpret_cast<const char*>(&in);
  for (size_t off = 0; off < sizeof(Instruction); off += 64) __builtin_prefetch(p + off);
}

class Checker {
 public:
  Checker(const ValidationContext& ctx, const Stream& s, size_t index, const Instruction& in,
          uint32_t grid)
      : ctx_(ctx), core_(*ctx.core), s_(s), index_(index), in_(in), grid_(grid) {}

  [[noreturn]] void fail(std::string_view rule, const std::string& detail) const {
    throw ValidationError(static_cast<int64_t>(index_), s_.id.name(),
                          std::string(opcode_name(in_.op)), std::string(rule), detail);
  }
  void require(bool ok, std::string_view rule, std::string_view detail) const {
    if (!ok) fail(rule, std::string(detail));
  }
  // Formats the detail only when the check fails: validation runs on every submit, and eager
  // formatting used to dominate the host time of timing-only runs.
  template <typename... Args>
  void require(bool ok, std::string_view rule, fmt::format_string<Args...> detail,
               Args&&... args) const {
    if (!ok) fail(rule, fmt::format(detail, std::forward<Args>(args)...));
  }

  void check_ap(const AccessPattern& ap, std::string_view role) const {
    require(ap.ndims <= kMaxFreeDims, "ap-shape", "{} has {} free dims; at most {}", role, ap.ndims,
            kMaxFreeDims);
    require(ap.partitions > 0, "ap-shape", "{} has zero partitions", role);
    for (int k = 0; k < ap.ndims; ++k) {
      require(ap.dims[k].size > 0, "ap-shape", "{} free dim {} has size 0", role, k);
    }
    require(static_cast<uint8_t>(ap.dtype) <= static_cast<uint8_t>(DType::kUint8), "dtype-support",
            "{} has an unknown dtype code {}", role, static_cast<int>(ap.dtype));
    // Element and byte counts are uint64 from here on (shape checks, executors, cost models): a
    // count that wrapped would compare equal to a small one.
    uint64_t n = dtype_size(ap.dtype);
    bool fits = !__builtin_mul_overflow(n, uint64_t{ap.partitions}, &n);
    for (int k = 0; k < ap.ndims; ++k) {
      fits = fits && !__builtin_mul_overflow(n, uint64_t{ap.dims[k].size}, &n);
    }
    if (!fits || n > static_cast<uint64_t>(INT64_MAX)) {
      std::string sizes;
      for (int k = 0; k < ap.ndims; ++k)
        sizes += fmt::format("{}{}", k ? " x " : "", ap.dims[k].size);
      fail("ap-shape", fmt::format("{} has {} partitions x [{}] {} elements: more than 2^63 bytes",
                                   role, ap.partitions, sizes, dtype_name(ap.dtype)));
    }
    const auto span = ap.byte_span();
    switch (ap.space) {
      case MemSpace::kSbuf:
      case MemSpace::kPsum: {
        const bool sbuf = ap.space == MemSpace::kSbuf;
        const uint32_t parts = sbuf ? core_.sbuf.partitions : core_.psum.partitions;
        const uint64_t pbytes = sbuf ? core_.sbuf.partition_bytes : core_.psum.partition_bytes;
        require(static_cast<uint64_t>(ap.start_partition) + ap.partitions <= parts,
                "partition-range", "{} uses partitions [{}, {}) of {} {}", role, ap.start_partition,
                static_cast<uint64_t>(ap.start_partition) + ap.partitions, mem_space_name(ap.space),
                parts);
        require(span.lo >= 0 && static_cast<uint64_t>(span.hi) <= pbytes,
                sbuf ? "sbuf-bounds" : "psum-bounds",
                "{} touches bytes [{}, {}) of each partition; {} has {} bytes per "
                "partition ({})",
                role, span.lo, span.hi, mem_space_name(ap.space), pbytes, ap);
        break;
      }
      case MemSpace::kHbm: {
        require(span.lo >= 0 && static_cast<uint64_t>(span.hi) <= ctx_.hbm_capacity, "hbm-bounds",
                "{} touches HBM bytes [{:#x}, {:#x}); HBM capacity is {:#x} ({})", role, span.lo,
                span.hi, ctx_.hbm_capacity, ap);
        if (ctx_.hbm_range_valid) {
          require(ctx_.hbm_range_valid(static_cast<uint64_t>(span.lo),
                                       static_cast<uint64_t>(span.hi - span.lo)),
                  "hbm-bounds", "{} touches HBM bytes [{:#x}, {:#x}) outside any allocation", role,
                  span.lo, span.hi);
        }
        break;
      }
      default:
        fail("memory-space", fmt::format("{} has an unknown memory space code {}", role,
                                         static_cast<int>(ap.space)));
    }
  }

  // ARCH-v2: 64 < P <= 128 -> start 0; 32 < P <= 64 -> 0 or 64; P <= 32 -> 0/32/64/96.
  void check_alignment(const AccessPattern& ap, std::string_view role) const {
    if (ap.space == MemSpace::kHbm) return;
    const uint32_t P = ap.partitions, s = ap.start_partition;
    const bool ok = P > 64 ? s == 0 : (P > 32 ? (s == 0 || s == 64) : (s % 32 == 0));
    require(ok, "partition-start-alignment", "{} starts at partition {} with {} partitions; {}",
            role, s, P,
            P > 64 ? "must start at 0"
                   : (P > 32 ? "must start at 0 or 64" : "must start at 0, 32, 64 or 96"));
  }

  void on_chip(const AccessPattern& ap, std::string_view role) const {
    require(ap.space != MemSpace::kHbm, "memory-space",
            "{} is in HBM; compute engines access only SBUF and PSUM", role);
    if (s_.id.engine == EngineKind::kGpSimd) {
      require(ap.space != MemSpace::kPsum, "memory-space",
              "{} is in PSUM; GpSimdE cannot access PSUM", role);
    }
  }

  void compute_operand(const AccessPattern& ap, std::string_view role) const {
    check_ap(ap, role);
    on_chip(ap, role);
    check_alignment(ap, role);
    if (s_.id.engine == EngineKind::kVector) {
      const uint64_t limit = ap.space == MemSpace::kPsum ? core_.vector.max_free_elements_psum
                                                         : core_.vector.max_free_elements_sbuf;
      require(ap.free_elements() <= limit, "free-size-limit",
              "{} has {} elements per partition; VectorE allows {} in {}", role, ap.free_elements(),
              limit, mem_space_name(ap.space));
    }
  }

  void same_shape(const AccessPattern& a, std::string_view ra, const AccessPattern& b,
                  std::string_view rb) const {
    require(a.partitions == b.partitions && a.free_elements() == b.free_elements(),
            "shape-mismatch", "{} is [{}, {}] but {} is [{}, {}]", ra, a.partitions,
            a.free_elements(), rb, b.partitions, b.free_elements());
  }

  void scalar_operand(const ScalarOperand& s, std::string_view role) const {
    if (!s.from_ap) return;
    compute_operand(s.ap, role);
    require(s.ap.partitions == in_.src0.partitions && s.ap.free_elements() == 1,
            "scalar-operand-shape", "{} must be [{}, 1] (one value per partition), got [{}, {}]",
            role, in_.src0.partitions, s.ap.partitions, s.ap.free_elements());
  }

  void check_alu(AluOp op, std::string_view role, bool integer_operands) const {
    require(static_cast<uint8_t>(op) <= static_cast<uint8_t>(AluOp::kShiftRight), "alu-op",
            "{} has an unknown operator code {}", role, static_cast<int>(op));
    if (alu_op_is_bitwise(op)) {
      require(integer_operands, "alu-op", "{} '{}' needs integer operands", role, alu_op_name(op));
    }
  }

  void run() const {
    require(static_cast<uint8_t>(in_.op) < kOpcodeCount, "engine-opcode", "unknown opcode code {}",
            static_cast<int>(in_.op));
    require(engine_supports(s_.id.engine, in_.op), "engine-opcode", "{} cannot execute {}",
            s_.id.display_name(), opcode_name(in_.op));
    require(in_.op == Opcode::kMatmul || in_.perf_mode == MatmulPerfMode::kNone, "matmul-perf-mode",
            "perf_mode is a matmul field; {} cannot take one", opcode_name(in_.op));
    switch (in_.op) {
      case Opcode::kSemWait:
      case Opcode::kSemSignal:
        require(in_.sem < core_.semaphores, "semaphore-range",
                "semaphore {} does not exist; the core has {}", in_.sem, core_.semaphores);
        if (in_.op == Opcode::kSemWait) {
          require(in_.sem_value >= 0, "semaphore-value", "wait target {} is negative",
                  in_.sem_value);
          require(in_.sem_pcore < 0, "semaphore-pcore",
                  "a wait reads its own core's semaphore; it cannot name program instance {}",
                  static_cast<int>(in_.sem_pcore));
        } else {
          require(in_.sem_pcore < static_cast<int>(grid_), "semaphore-pcore",
                  "signals program instance {}, but the launch has {} (grid {})",
                  static_cast<int>(in_.sem_pcore), grid_, grid_);
          require(in_.sem_value > 0, "semaphore-value", "signal increment {} must be positive",
                  in_.sem_value);
        }
        return;
      case Opcode::kMatmul:
        return matmul();
      case Opcode::kTranspose:
        return transpose();
      case Opcode::kActivation:
        return activation();
      case Opcode::kTensorTensor: {
        compute_operand(in_.dst, "dst");
        compute_operand(in_.src0, "src0");
        compute_operand(in_.src1, "src1");
        same_shape(in_.dst, "dst", in_.src0, "src0");
        same_shape(in_.dst, "dst", in_.src1, "src1");
        require(!(in_.src0.space == MemSpace::kPsum && in_.src1.space == MemSpace::kPsum),
                "both-inputs-psum", "tensor_tensor cannot read both inputs from PSUM");
        require(in_.alu0 != AluOp::kBypass, "alu-op", "tensor_tensor needs an operator");
        check_alu(in_.alu0, "alu0", is_integer(in_.src0.dtype) && is_integer(in_.src1.dtype));
        return;
      }
      case Opcode::kTensorScalar: {
        compute_operand(in_.dst, "dst");
        compute_operand(in_.src0, "src0");
        same_shape(in_.dst, "dst", in_.src0, "src0");
        scalar_operand(in_.operand0, "operand0");
        scalar_operand(in_.operand1, "operand1");
        auto int_op = [&](const ScalarOperand& s) {
          return is_integer(in_.src0.dtype) && (s.from_ap ? is_integer(s.ap.dtype) : true);
        };
        check_alu(in_.alu0, "alu0", int_op(in_.operand0));
        check_alu(in_.alu1, "alu1", int_op(in_.operand1));
        return;
      }
      case Opcode::kTensorReduce: {
        compute_operand(in_.dst, "dst");
        compute_operand(in_.src0, "src0");
        require(in_.reduce_axes >= 1 && in_.reduce_axes <= in_.src0.ndims, "reduce-axes",
                "reduce_axes {} must be in [1, {}] (src0 free dims)", in_.reduce_axes,
                in_.src0.ndims);
        require(static_cast<uint8_t>(in_.reduce) <= static_cast<uint8_t>(ReduceOp::kMultiply),
                "alu-op", "unknown reduce operator code {}", static_cast<int>(in_.reduce));
        uint64_t inner = 1;
        for (int k = in_.src0.ndims - in_.reduce_axes; k < in_.src0.ndims; ++k) {
          inner *= in_.src0.dims[k].size;
        }
        // Divide rather than multiply: dst.free_elements() * inner may wrap.
        require(in_.dst.partitions == in_.src0.partitions &&
                    in_.src0.free_elements() / inner == in_.dst.free_elements(),
                "shape-mismatch",
                "dst is [{}, {}] but reducing {} innermost axes of src0 [{}, {}] "
                "gives [{}, {}]",
                in_.dst.partitions, in_.dst.free_elements(), in_.reduce_axes, in_.src0.partitions,
                in_.src0.free_elements(), in_.src0.partitions, in_.src0.free_elements() / inner);
        return;
      }
      case Opcode::kTensorCopy:
        compute_operand(in_.dst, "dst");
        compute_operand(in_.src0, "src0");
        same_shape(in_.dst, "dst", in_.src0, "src0");
        return;
      case Opcode::kIota:
      case Opcode::kMemset:
        compute_operand(in_.dst, "dst");
        return;
      case Opcode::kRng:
        compute_operand(in_.dst, "dst");
        require(static_cast<uint8_t>(in_.rng_dist) <= static_cast<uint8_t>(RngDist::kInteger),
                "alu-op", "unknown rng distribution code {}", static_cast<int>(in_.rng_dist));
        if (in_.rng_dist == RngDist::kInteger) {
          // The executor draws bits % (trunc(imm2) - trunc(imm)) in int64: an empty truncated
          // range is a division by zero, a non-finite or huge bound an undefined cast.
          auto bounded = [](float v) { return v >= -0x1p31f && v <= 0x1p31f; };  // false for NaN
          require(bounded(in_.imm) && bounded(in_.imm2), "alu-op",
                  "rng integer bounds [{}, {}) must be finite and within +-2^31", in_.imm,
                  in_.imm2);
          require(std::trunc(in_.imm2) > std::trunc(in_.imm), "alu-op",
                  "rng integer range [{}, {}) holds no integer (bounds truncate to [{}, {}))",
                  in_.imm, in_.imm2, std::trunc(in_.imm), std::trunc(in_.imm2));
        }
        return;
      case Opcode::kSelect:
        compute_operand(in_.dst, "dst");
        compute_operand(in_.src0, "predicate (src0)");
        compute_operand(in_.src1, "on_true (src1)");
        same_shape(in_.dst, "dst", in_.src0, "predicate (src0)");
        same_shape(in_.dst, "dst", in_.src1, "on_true (src1)");
        if (in_.has_src2) {
          compute_operand(in_.src2, "on_false (src2)");
          same_shape(in_.dst, "dst", in_.src2, "on_false (src2)");
        }
        return;
      case Opcode::kDmaCopy:
        return dma();
    }
    fail("engine-opcode", "unknown opcode code");
  }

  void matmul() const {
    const auto& st = in_.src0;
    const auto& mv = in_.src1;
    const auto& d = in_.dst;
    check_ap(st, "stationary (src0)");
    check_ap(mv, "moving (src1)");
    check_ap(d, "dst");
    require(st.space == MemSpace::kSbuf && mv.space == MemSpace::kSbuf, "memory-space",
            "TensorE reads both matmul operands from SBUF");
    require(d.space == MemSpace::kPsum, "memory-space", "TensorE writes matmul results to PSUM");
    check_alignment(st, "stationary (src0)");
    check_alignment(mv, "moving (src1)");
    check_alignment(d, "dst");
    auto mm_dtype = [](DType t) { return is_float(t); };
    require(mm_dtype(st.dtype) && mm_dtype(mv.dtype), "dtype-support",
            "matmul inputs must be fp8/bf16/fp16/fp32, got {} and {}", dtype_name(st.dtype),
            dtype_name(mv.dtype));
    require((st.dtype == DType::kFp32) == (mv.dtype == DType::kFp32), "dtype-support",
            "an fp32 matmul input must pair with fp32, got {} and {}", dtype_name(st.dtype),
            dtype_name(mv.dtype));
    require(d.dtype == DType::kFp32, "dtype-support",
            "matmul accumulates in fp32 PSUM; dst must be fp32, got {}", dtype_name(d.dtype));
    require(st.partitions <= core_.tensor.rows, "matmul-contraction",
            "contraction (partitions) {} exceeds the {} PE rows", st.partitions, core_.tensor.rows);
    require(st.partitions == mv.partitions, "matmul-contraction",
            "stationary has {} partitions but moving has {}", st.partitions, mv.partitions);
    uint64_t rows = 1;
    if (in_.perf_mode == MatmulPerfMode::kDoubleRow) {
      // ARCH-v3 double FP8: NeuronCore-v3 on, FP8 x FP8 only, [P, 2, F] operands.
      require(core_.tensor.fp8_double_row_cost_factor > 0, "matmul-perf-mode",
              "perf_mode double_row is not supported by this NeuronCore (preset "
              "tensor.fp8_double_row_cost_factor = 0; ARCH-v3: introduced with NeuronCore-v3)");
      require(is_fp8(st.dtype) && is_fp8(mv.dtype), "matmul-perf-mode",
              "perf_mode double_row needs FP8 x FP8 inputs, got {} and {}", dtype_name(st.dtype),
              dtype_name(mv.dtype));
      for (const AccessPattern* ap : {&st, &mv}) {
        require(ap->ndims >= 2 && ap->dims[0].size == 2, "matmul-perf-mode",
                "perf_mode double_row operands are [P, 2, F] (row pair outermost), got {}",
                ap->to_string());
      }
      rows = 2;
    } else {
      require(in_.perf_mode == MatmulPerfMode::kNone, "matmul-perf-mode",
              "unknown matmul perf_mode {}", static_cast<int>(in_.perf_mode));
    }
    const uint64_t sf = st.free_elements() / rows, mf = mv.free_elements() / rows;
    require(sf <= core_.tensor.columns, "matmul-stationary-size",
            "stationary free size {} exceeds the {} PE columns", sf, core_.tensor.columns);
    require(mf <= core_.tensor.moving_free_max, "matmul-moving-size",
            "moving free size {} exceeds {}", mf, core_.tensor.moving_free_max);
    require(d.partitions == sf && d.free_elements() == mf, "shape-mismatch",
            "dst must be [{}, {}] (stationary free x moving free), got [{}, {}]", sf, mf,
            d.partitions, d.free_elements());
    const auto span = d.byte_span();
    const uint64_t bank = core_.psum.bank_bytes();
    require(static_cast<uint64_t>(span.lo) / bank == static_cast<uint64_t>(span.hi - 1) / bank,
            "psum-bank", "dst bytes [{}, {}) cross a PSUM bank boundary (banks of {} bytes)",
            span.lo, span.hi, bank);
  }

  void transpose() const {
    check_ap(in_.src0, "src0");
    check_ap(in_.dst, "dst");
    require(in_.src0.space == MemSpace::kSbuf && in_.dst.space == MemSpace::kPsum, "memory-space",
            "TensorE transpose reads SBUF and writes PSUM");
    check_alignment(in_.src0, "src0");
    check_alignment(in_.dst, "dst");
    require(in_.src0.partitions <= core_.tensor.rows &&
                in_.src0.free_elements() <= core_.tensor.columns,
            "matmul-stationary-size", "transpose input [{}, {}] exceeds the {}x{} PE array",
            in_.src0.partitions, in_.src0.free_elements(), core_.tensor.rows, core_.tensor.columns);
    require(in_.dst.partitions == in_.src0.free_elements() &&
                in_.dst.free_elements() == in_.src0.partitions,
            "shape-mismatch", "dst must be [{}, {}], got [{}, {}]", in_.src0.free_elements(),
            in_.src0.partitions, in_.dst.partitions, in_.dst.free_elements());
    require(is_float(in_.src0.dtype) &&
                (in_.dst.dtype == DType::kFp32 || in_.dst.dtype == in_.src0.dtype),
            "dtype-support",
            "transpose takes a float input and writes fp32 or the input type, got "
            "{} -> {}",
            dtype_name(in_.src0.dtype), dtype_name(in_.dst.dtype));
  }

  void activation() const {
    compute_operand(in_.dst, "dst");
    compute_operand(in_.src0, "src0");
    same_shape(in_.dst, "dst", in_.src0, "src0");
    require(static_cast<uint8_t>(in_.func) <= static_cast<uint8_t>(ActFunc::kSiluDx),
            "activation-function", "unknown activation function code {}",
            static_cast<int>(in_.func));
    scalar_operand(in_.operand0, "scale (operand0)");
    scalar_operand(in_.operand1, "bias (operand1)");
    if (in_.has_acc_dst) {
      compute_operand(in_.acc_dst, "acc_dst");
      require(in_.acc_dst.partitions == in_.src0.partitions && in_.acc_dst.free_elements() == 1,
              "scalar-operand-shape", "acc_dst must be [{}, 1], got [{}, {}]", in_.src0.partitions,
              in_.acc_dst.partitions, in_.acc_dst.free_elements());
    }
  }

  void dma() const {
    check_ap(in_.src0, "src0");
    check_ap(in_.dst, "dst");
    require(in_.src0.space != MemSpace::kPsum && in_.dst.space != MemSpace::kPsum, "memory-space",
            "DMA moves data between HBM and SBUF; it cannot access PSUM");
    require(in_.src0.elements() == in_.dst.elements(), "shape-mismatch",
            "src0 has {} elements but dst has {}", in_.src0.elements(), in_.dst.elements());
  }

 private:
  const ValidationContext& ctx_;
  const CoreParams& core_;
  const Stream& s_;
  size_t index_;
  const Instruction& in_;
  const uint32_t grid_;
};

}  // namespace

const std::vector<std::string_view>& validation_rules() {
  return kRules;
}

void validate(const Program& program, const ValidationContext& ctx) {
  // Note [LNC launch]: a grid of N runs N program instances on N physical cores of one logical
  // core; trn1 (logical core size 1) runs grid 1 only.
  if (program.grid < 1 || program.grid > ctx.logical_core_size) {
    throw ValidationError(
        -1, "-", "-", "grid",
        fmt::format("program '{}' launches on {} physical cores (grid {}), but a logical "
                    "NeuronCore of this preset has {} (chip.logical_core_size)",
                    program.name, program.grid, program.grid, ctx.logical_core_size));
  }
  std::set<std::string> seen;
  for (const Stream& s : program.streams) {
    if (s.id.pcore >= program.grid) {
      throw ValidationError(-1, s.id.name(), "-", "grid",
                            fmt::format("stream of program instance {} in a launch of grid {}",
                                        s.id.pcore, program.grid));
    }
    if (s.id.engine > EngineKind::kDma) {
      throw ValidationError(-1, s.id.name(), "-", "stream-id",
                            fmt::format("engine code {} is not an engine (tensor, vector, scalar, "
                                        "gpsimd, dma)",
                                        static_cast<int>(s.id.engine)));
    }
    if (s.id.engine != EngineKind::kDma && s.id.queue != 0) {
      throw ValidationError(-1, s.id.name(), "-", "stream-id",
                            fmt::format("{} has no queues, but this stream names queue {}",
                                        s.id.display_name(), s.id.queue));
    }
    if (!seen.insert(s.id.name()).second) {
      throw ValidationError(-1, s.id.name(), "-", "stream-duplicate",
                            "the program has two streams for " + s.id.display_name());
    }
    if (s.id.engine == EngineKind::kDma && s.id.queue >= ctx.core->dma.queues) {
      throw ValidationError(-1, s.id.name(), "-", "dma-queue-range",
                            fmt::format("DMA queue {} does not exist; the core has {} queues",
                                        s.id.queue, ctx.core->dma.queues));
    }
    const size_t n = s.instructions.size();
    for (size_t i = 0; i < n; ++i) {
      // A large program is megabytes of instructions, read once here: fetch a few ahead so the
      // checks do not wait on memory (they dominated validation).
      if (i + kPrefetchAhead < n) prefetch_instruction(s.instructions[i + kPrefetchAhead]);
      Checker(ctx, s, i, s.instructions[i], program.grid).run();
    }
  }
}

}  // namespace neuronsim::device_model
