#pragma once
// Splits an N-d index space shared by several tensors (same sizes, each with its own strides;
// stride 0 = broadcast) into tiles of [partitions <= 128, up to 2 free dims], choosing the
// largest outer dimension for the partitions and folding small inner dimensions into the free
// size so tiles stay large. Each tile gives, per operand, an element offset, a partition stride
// and free strides: exactly what an access pattern needs.
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct TileOperand {
  int64_t offset = 0;  // elements from the tensor's base
  int64_t partition_stride = 0;
  std::array<int64_t, 2> free_strides{0, 0};
};

struct Tile {
  uint32_t partitions = 1;
  uint8_t nfree = 1;
  std::array<uint32_t, 2> free_sizes{1, 1};  // outer, inner (inner only when nfree == 1)
  std::vector<TileOperand> operands;
  uint64_t free_elements() const {
    return nfree == 2 ? uint64_t{free_sizes[0]} * free_sizes[1] : free_sizes[0];
  }
};

/// A block of a 1-D run laid out as rows of `row` elements, one row per partition.
struct RowBlock {
  int64_t first = 0;   // the block's first element
  uint32_t rows = 0;   // partitions used
  uint32_t cols = 0;   // elements per row (shorter for the run's partial last row)
  uint64_t index = 0;  // blocks emitted before this one (for double-buffer slots)
};
/// n elements as blocks of up to `partitions` full rows of `row` elements; a partial last row
/// is a block of its own, so every block is a rectangle (generators: arange, linspace).
void for_each_row_block(int64_t n, int64_t row, uint32_t partitions,
                        const std::function<void(const RowBlock&)>& fn);

/// The HBM access pattern of operand `o` of a tile of tensor `t`.
device_model::AccessPattern tile_ap(const TensorDesc& t, const Tile& tile, const TileOperand& o);

/// sizes: the shared shape; strides[k]: operand k's strides (same rank as sizes).
std::vector<Tile> make_tiles(const std::vector<int64_t>& sizes,
                             const std::vector<std::vector<int64_t>>& strides,
                             uint32_t max_partitions, uint64_t max_free_elements);

/// Tiles for operands stored transposed relative to the output (an input contiguous along a
/// dim where the output is not): [partitions along that dim, free along the output's
/// contiguous dim], both <= `edge`, so such an input loads as contiguous rows and is
/// transposed on TensorE. `transposable[k]` says whether operand k may be (float data); the
/// last operand is the output. Empty when no operand needs it.
std::vector<Tile> make_transpose_tiles(const std::vector<int64_t>& sizes,
                                       const std::vector<std::vector<int64_t>>& strides,
                                       const std::vector<bool>& transposable, uint32_t edge);

/// The HBM access pattern that loads operand `o` of a tile that reads it transposed
/// (reads_transposed) as rows along the tile's free dim, each a contiguous run of the input:
/// [free_sizes[0] partitions, t.partitions elements], ready for a TensorE transpose.
device_model::AccessPattern transposed_rows_ap(const TensorDesc& t, const Tile& tile,
                                               const TileOperand& o);

/// True when tile operand `o` reads an input transposed: contiguous along the partitions, a
/// strided single free dim, and both extents within a TensorE transpose.
bool reads_transposed(const Tile& t, const TileOperand& o, uint32_t edge);

/// Drops size-1 dims and merges neighbours that are contiguous in every operand.
void coalesce(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides);

}  // namespace neuronsim::kernels
