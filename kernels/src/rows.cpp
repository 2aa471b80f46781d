#include "neuronsim/kernels/rows.h"

#include <algorithm>

#include "neuronsim/kernels/tiling.h"

namespace neuronsim::kernels {

RowLayout row_layout(const std::vector<int64_t>& sizes,
                     const std::vector<std::vector<int64_t>>& strides, int64_t col_dim,
                     uint32_t max_rows) {
  RowLayout l;
  const size_t ops = strides.size();
  const int64_t nd = static_cast<int64_t>(sizes.size());
  if (col_dim < 0) col_dim += nd;
  std::vector<int64_t> rs;
  std::vector<std::vector<int64_t>> rst(ops);
  for (int64_t d = 0; d < nd; ++d) {
    if (d == col_dim) continue;
    rs.push_back(sizes[d]);
    for (size_t k = 0; k < ops; ++k) rst[k].push_back(strides[k][d]);
  }
  l.cols = nd ? sizes[col_dim] : 1;
  for (size_t k = 0; k < ops; ++k) l.col_stride.push_back(nd ? strides[k][col_dim] : 0);
  coalesce(rs, rst);
  if (rs.empty()) {
    rs = {1};
    for (auto& s : rst) s = {0};
  }
  for (int64_t s : rs) {
    if (s == 0) return l;
  }
  const size_t nr = rs.size();
  std::vector<int64_t> idx(nr - 1, 0);
  while (true) {
    std::vector<int64_t> base(ops, 0);
    for (size_t j = 0; j + 1 < nr; ++j) {
      for (size_t k = 0; k < ops; ++k) base[k] += idx[j] * rst[k][j];
    }
    for (int64_t r0 = 0; r0 < rs.back(); r0 += max_rows) {
      RowTile t;
      t.rows = static_cast<uint32_t>(std::min<int64_t>(max_rows, rs.back() - r0));
      for (size_t k = 0; k < ops; ++k) {
        t.offset.push_back(base[k] + r0 * rst[k].back());
        t.row_stride.push_back(rst[k].back());
      }
      l.tiles.push_back(std::move(t));
    }
    size_t j = nr - 1;
    while (j > 0 && ++idx[j - 1] == rs[j - 1]) idx[--j] = 0;
    if (j == 0) break;
  }
  return l;
}

uint32_t row_chunk(const device_model::CoreParams& core, uint32_t buffers, int64_t cols) {
  const uint64_t budget = core.sbuf.partition_bytes * 3 / 4;
  const uint64_t cap =
      std::min<uint64_t>(core.vector.max_free_elements_sbuf, budget / (4 * buffers));
  return static_cast<uint32_t>(
      std::min<int64_t>(cols, static_cast<int64_t>(std::max<uint64_t>(cap, 1))));
}

device_model::AccessPattern row_ap(const TensorDesc& t, const RowLayout& l, const RowTile& tile,
                                   size_t k, int64_t c0, uint32_t count) {
  return hbm_ap(t, tile.offset[k] + c0 * l.col_stride[k], tile.rows, tile.row_stride[k],
                {{l.col_stride[k], count}});
}

}  // namespace neuronsim::kernels
