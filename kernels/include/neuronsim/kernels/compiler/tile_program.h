#pragma once
// A fused region over a tile space: the region's tensors are seen as rows x columns (the last
// dim is the columns), rows go to SBUF partitions 128 at a time and every intermediate stays in
// SBUF. Values live in one of four spaces: full tiles [rows, cols], per-row columns [rows, 1]
// (row reductions: softmax maxima, layer-norm statistics), per-column rows broadcast to every
// partition (bias, weights) and scalars. Row reductions run on VectorE, reductions over the
// rows (bias gradients) accumulate in PSUM on TensorE (ones^T @ tile) across row tiles.
//
// The same tile body is a matmul's epilogue (matmul_region.h): there the accumulator in PSUM
// is one more full-tile value.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/synced_builder.h"

namespace neuronsim::kernels::compiler {

enum class Space : uint8_t { kFull, kRow, kCol, kScalar };
const char* space_name(Space s);

/// An HBM tensor the region reads or writes.
struct TileOperand {
  int value = -1;        // graph value (for relocation and reporting)
  uint64_t address = 0;  // byte address of element 0 (virtual until the graph is launched)
  device_model::DType dtype = device_model::DType::kFp32;
  std::vector<int64_t> strides;  // element strides over the region shape (0: broadcast)
  Space space = Space::kFull;
};

struct TileInstr {
  enum class Kind {
    kLoad,       // operand -> on-chip value
    kAcc,        // the matmul accumulator (epilogues only)
    kStep,       // one expression step: Arg::step(i) is instruction i's value
    kRowReduce,  // [rows, cols] -> [rows, 1] over the columns
    kColReduce,  // sum over every row (of a full tile or a per-row column) -> operand
    kStore,      // value src -> operand
  };
  Kind kind = Kind::kStep;
  Space space = Space::kFull;  // of the result (kStore/kColReduce: of the operand)
  int operand = -1;
  int src = -1;
  Step step;
  device_model::ReduceOp reduce = device_model::ReduceOp::kAdd;
  float scale = 1.0f;
  bool nonzero = false;
};

struct TileProgramSpec {
  std::string name;
  std::vector<int64_t> shape;  // the region's tile space; the last dim is the columns
  std::vector<TileOperand> operands;
  std::vector<TileInstr> instrs;
};

/// Emits a tile region as its own program. Throws std::length_error when its values do not fit
/// SBUF (a row reduction needs whole rows) and std::invalid_argument for a malformed spec.
device_model::Program build_tile_program(const TileProgramSpec& spec,
                                         const device_model::CoreParams& core);

/// Whether a region is elementwise over contiguous tensors only (it then tiles as one flat
/// range of [128, n/128]).
bool tile_program_is_flat(const TileProgramSpec& spec, const device_model::CoreParams& core);

/// Whether two tile programs compute the same thing on different tensors (the same
/// instructions; operands alike in space and dtype).
bool same_structure(const TileProgramSpec& a, const TileProgramSpec& b);

/// Several flat, alike, independent regions (an optimizer's update of each parameter) in their
/// flattened form. Throws std::invalid_argument when they are not flat and alike.
std::vector<TileProgramSpec> flatten_group(const std::string& name,
                                           const std::vector<TileProgramSpec>& specs,
                                           const device_model::CoreParams& core);
/// A flattened group (flatten_group) as one program: their tiles share one pipeline.
device_model::Program build_tile_program_group(const std::string& name,
                                               const std::vector<TileProgramSpec>& flat,
                                               const device_model::CoreParams& core);

/// Whether a tile program transposes an operand on TensorE (one laid out along its rows).
bool tile_program_transposes(const TileProgramSpec& spec, const device_model::CoreParams& core);

/// A region of elementwise steps only (no reductions, no per-row values) as the library's
/// elementwise kernel; nullopt for other regions.
std::optional<device_model::Program> build_pointwise_program(const TileProgramSpec& spec,
                                                             const device_model::CoreParams& core);

/// The tile body, shared by standalone tile programs and matmul epilogues.
class TileEmitter {
 public:
  /// Where a tile is: `rows` partitions, columns [c0, c0 + cols) of the region, and each
  /// operand's HBM access pattern for it (`operand_ap(k, count)`: count columns from c0).
  struct Tile {
    uint32_t rows = 0;
    int64_t c0 = 0;
    uint32_t cols = 0;
    int slot = 0;
    bool first = true;  // first tile of its column chunk (reductions over rows start here)
    std::function<device_model::AccessPattern(int operand, uint32_t count)> operand_ap;
    device_model::AccessPattern acc;     // kAcc: the accumulator in PSUM
    SyncedBuilder::Buffer acc_buf = -1;  // its hazard-tracked bank
  };

  /// Plans buffers for chunks of up to `max_cols` columns in `slots` tile slots (tiles in
  /// flight); `col_chunks` chunks share the region's reductions over rows. Per-column operands
  /// are loaded once per chunk for every row tile when there is one chunk, or when all chunks'
  /// copies fit `hoist_chunk_budget` bytes per partition (else once per tile). Throws
  /// std::length_error when SBUF or PSUM is too small.
  /// `chunk_major`: tiles come chunk by chunk (every row tile of a chunk before the next), so
  /// the reductions over rows of all chunks share one chunk's PSUM banks, each chunk's result
  /// stored by flush() before the next chunk starts.
  TileEmitter(const TileProgramSpec& spec, SyncedBuilder& sb, const device_model::CoreParams& core,
              uint32_t max_cols, uint32_t col_chunks, uint32_t load_queue_base,
              uint32_t store_queue_base, uint32_t slots = 2, bool transposes = false,
              uint64_t hoist_chunk_budget = 0, bool chunk_major = false);

  /// The widest column chunk whose buffers fit `sbuf_bytes` per partition (0 if none).
  static uint32_t max_chunk(const TileProgramSpec& spec, uint64_t sbuf_bytes, uint32_t slots = 2);
  static bool has_row_reduce(const TileProgramSpec& spec);
  static bool has_col_reduce(const TileProgramSpec& spec);

  /// Loads of per-column and scalar operands shared by every row tile (one chunk only).
  void prologue();
  /// Hoisted loads are loaded again for the next tiles (another group member's operands).
  void reset_hoisted() { hoist_loaded_.clear(); }
  void tile(const Tile& t, uint32_t chunk);
  /// Several tiles (each in its own slot) emitted instruction by instruction, interleaved.
  void tiles(const std::vector<std::pair<Tile, uint32_t>>& group);
  /// Reductions over rows: PSUM -> SBUF -> HBM, for every chunk (`chunk_ap(k, chunk)` is the
  /// operand's [1, cols] pattern of that chunk).
  void epilogue(
      const std::function<device_model::AccessPattern(int operand, uint32_t chunk)>& chunk_ap);
  /// Chunk-major only: stores chunk `chunk`'s reductions over rows (after its last row tile).
  void flush(
      uint32_t chunk,
      const std::function<device_model::AccessPattern(int operand, uint32_t chunk)>& chunk_ap);
  /// PSUM banks the reductions over rows take with chunks of `max_cols` columns.
  static uint32_t col_reduce_banks(const TileProgramSpec& spec, uint32_t max_cols, uint32_t chunks,
                                   const device_model::CoreParams& core);

 private:
  device_model::AccessPattern value_ap(int instr, const Tile& t, bool as_full) const;
  void emit_instr(size_t index, const Tile& t, uint32_t chunk);
  // Transposed loads and stores (tiles of at most 128 x 128 whose operand runs along rows).
  bool row_contiguous(const device_model::AccessPattern& ap, const Tile& t) const;
  static device_model::AccessPattern natural(const device_model::AccessPattern& ap, const Tile& t);
  void emit_step(int i, const Tile& t);

  const TileProgramSpec& spec_;
  SyncedBuilder& sb_;
  const device_model::CoreParams& core_;
  uint32_t max_cols_, chunks_;
  uint32_t load_q_, store_q_;
  // Per instruction: its buffer slot index (full or row pool) and the buffer ids per tile slot.
  std::vector<int> reg_;
  uint32_t slots_;
  std::vector<std::vector<uint64_t>> full_off_, row_off_;  // [slot][register]
  std::vector<std::vector<SyncedBuilder::Buffer>> full_buf_, row_buf_;
  std::vector<uint64_t> scratch_off_;
  std::vector<SyncedBuilder::Buffer> scratch_buf_;
  // Hoisted per-column / scalar operands (by instruction).
  std::vector<uint64_t> hoist_off_;
  std::vector<std::vector<SyncedBuilder::Buffer>> hoist_buf_;  // [instruction][chunk]
  bool hoisted_ = false;
  bool chunk_copies_ = false;  // per-column operands hoisted per chunk (several chunks)
  uint32_t hoist_chunk(const Tile& t) const;
  SyncedBuilder::Buffer hoist_buf(size_t instr, const Tile& t) const;
  double vector_ns_ = 0, scalar_ns_ = 0;  // work given to each so far (engine balancing)
  bool transpose_loads_ = false;
  std::vector<uint64_t> stage_off_;
  std::vector<SyncedBuilder::Buffer> stage_buf_;
  uint64_t tr_bank_[2] = {0, 0};
  SyncedBuilder::Buffer tr_buf_[2] = {0, 0};
  uint64_t transposes_ = 0;
  std::set<int> hoist_loaded_;
  // Reductions over rows: a PSUM bank per (instruction, chunk, 512-column piece).
  struct ColAcc {
    int instr;
    uint32_t chunk;
    uint32_t piece;
    uint64_t bank;
    SyncedBuilder::Buffer buf;
  };
  std::vector<ColAcc> col_acc_;
  bool chunk_major_ = false;  // col_acc_ holds chunk 0's banks, shared by every chunk
  void flush_acc(const ColAcc& acc, uint32_t chunk,
                 const std::function<device_model::AccessPattern(int, uint32_t)>& chunk_ap);
  uint64_t ones_off_ = 0, evac_off_ = 0;
  SyncedBuilder::Buffer ones_buf_ = 0, evac_buf_ = 0;
};

}  // namespace neuronsim::kernels::compiler
