#pragma once
// Row-wise kernels (softmax, layernorm) see a tensor as rows x columns: the column dim is the one
// the op normalises over, every other dim is a row. This enumerates tiles of up to 128 rows (one
// per partition) with each operand's offsets and row strides.
#include <cstdint>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct RowTile {
  uint32_t rows = 0;
  std::vector<int64_t> offset;      // per operand, elements
  std::vector<int64_t> row_stride;  // per operand
};

/// `operands` share `sizes` (broadcast operands pass stride 0); `col_dims` are the trailing
/// dims folded into columns (they must be contiguous per operand, or a single dim).
struct RowLayout {
  int64_t cols = 1;
  std::vector<int64_t> col_stride;  // per operand
  std::vector<RowTile> tiles;
};

RowLayout row_layout(const std::vector<int64_t>& sizes,
                     const std::vector<std::vector<int64_t>>& strides, int64_t col_dim,
                     uint32_t max_rows);

/// Columns per SBUF chunk when `buffers` fp32 buffers of a row chunk share three quarters of a
/// partition (and VectorE's free-size limit): the whole row when it fits.
uint32_t row_chunk(const device_model::CoreParams& core, uint32_t buffers, int64_t cols);

/// An HBM access pattern for [rows, count] columns starting at column c0 of operand k.
device_model::AccessPattern row_ap(const TensorDesc& t, const RowLayout& l, const RowTile& tile,
                                   size_t k, int64_t c0, uint32_t count);

}  // namespace neuronsim::kernels
