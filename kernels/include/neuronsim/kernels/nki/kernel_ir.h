#pragma once
// What the NKI front end (python/neuronsim/nki) traces from a kernel, in the compiler's terms:
// a flat statement list with loops (a legacy `affine_range` body is traced once and expanded
// here, one instance per iteration), tile allocations, and instruction templates whose addresses
// are affine in the loop variables. lower.h turns it into a device Program.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/device_model/isa.h"

namespace neuronsim::kernels::nki {

/// constant + sum(coefficient * variable): a tile's address or partition as the loops advance.
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<uint32_t, int64_t>> terms;  // (variable, coefficient)

  int64_t eval(const std::vector<int64_t>& vars) const {
    int64_t v = constant;
    for (const auto& [var, coef] : terms) v += coef * vars[var];
    return v;
  }
};

/// One tensor of the kernel: an HBM tensor (argument, output or scratch; the caller placed it)
/// or an on-chip tile declaration, allocated afresh each time its statement runs.
struct Buffer {
  std::string name;   // for messages: "a_input", "ndarray at kernel.py:12"
  std::string shape;  // for messages: "[128, 512] bf16"
  device_model::MemSpace space = device_model::MemSpace::kSbuf;
  uint32_t partitions = 1;   // SBUF/PSUM
  uint64_t bytes = 0;        // per partition (SBUF/PSUM); total (HBM)
  uint64_t hbm_address = 0;  // HBM only
  /// PSUM: a zero-initialised tile whose only writers are whole-tile accumulating matmuls: its
  /// memset is dropped and the first matmul overwrites instead (what nl.zeros + `+=` compiles to).
  bool elide_zero = false;
  int32_t source = -1;
};

/// An operand: an access into a buffer over the op's iteration space, partition axis first.
struct Operand {
  int32_t buffer = -1;  // -1: absent
  device_model::DType dtype = device_model::DType::kFp32;
  Affine start_partition;        // SBUF/PSUM: first partition within the buffer
  uint32_t partitions = 1;       // size of the partition axis
  int64_t partition_stride = 0;  // HBM: elements between consecutive partition indices
  Affine offset;                 // elements from the buffer's start (SBUF/PSUM: in a partition)
  std::vector<device_model::Dim> dims;  // free axes of the iteration space, outermost first
};

/// tensor_scalar / activation scalar: an immediate or a per-partition [P, 1] operand.
struct Scalar {
  bool from_operand = false;
  float imm = 0.0f;
  Operand operand;
};

/// A mask bound on one iteration axis (0 = partition, k = free axis k - 1):
/// upper: index < ceil(numerator / divisor); lower: index >= ceil(numerator / divisor).
struct Clamp {
  uint8_t axis = 0;
  bool upper = true;
  Affine numerator;
  int64_t divisor = 1;
};

enum class Accumulate : uint8_t {
  kOverwrite,
  kAccumulate,
  /// NKI 0.3 nc_matmul into PSUM: the first write to a tile overwrites, later ones accumulate.
  kFirstOverwrites,
};

struct Op {
  /// Opcode and every non-operand field (alu ops, function, reduce, immediates, iota ...).
  device_model::Instruction inst;
  std::optional<device_model::EngineKind> engine;  // none: the opcode's default engine
  Operand dst, src0, src1, src2, acc_dst;
  Scalar operand0, operand1;
  Accumulate accumulate = Accumulate::kOverwrite;
  std::vector<Clamp> clamps;
  int32_t source = -1;  // index into Kernel::sources
};

enum class StmtKind : uint8_t { kLoop, kEnd, kAlloc, kFree, kOp };

struct Stmt {
  StmtKind kind = StmtKind::kOp;
  uint32_t index = 0;  // loop: variable; alloc/free: buffer; op: op
  int64_t trip = 0;    // loop: iterations
  uint32_t end = 0;    // loop: index of its kEnd statement (filled by finalize())
};

struct Kernel {
  std::string name;
  std::vector<std::string> sources;  // "kernel.py:12"
  std::vector<Buffer> buffers;
  std::vector<Op> ops;
  std::vector<Stmt> body;
  uint32_t variables = 0;
  /// Program instances: the physical cores of the logical core the kernel runs on (nl.nc(2),
  /// kernel[2]); each expands `body` with `core_variable` set to its index.
  uint32_t grid = 1;
  int32_t core_variable = -1;

  /// Matches loops with their ends; throws std::invalid_argument on an unbalanced body.
  void finalize();
};

}  // namespace neuronsim::kernels::nki
