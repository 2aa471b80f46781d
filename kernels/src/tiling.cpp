#include "neuronsim/kernels/tiling.h"

#include <algorithm>
#include <cstdlib>

namespace neuronsim::kernels {
namespace {

struct Layout {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim]
  std::vector<int64_t> base;                  // [operand] element offset
};

// Splits dim d into [size / f, f] (requires size % f == 0).
void split(Layout& l, size_t d, int64_t f) {
  const int64_t outer = l.sizes[d] / f;
  l.sizes[d] = f;
  l.sizes.insert(l.sizes.begin() + static_cast<int64_t>(d), outer);
  for (auto& s : l.strides) s.insert(s.begin() + static_cast<int64_t>(d), s[d] * f);
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t r = std::min(n, cap); r > 1; --r) {
    if (n % r == 0) return r;
  }
  return 1;
}

void emit(const Layout& l, uint32_t max_p, uint64_t max_free, std::vector<Tile>& out) {
  const size_t n = l.sizes.size();  // >= 2 here; last dim is inner, dims [0, n-1) are outer
  const size_t ops = l.strides.size();
  // Partition dim: the largest outer dim; a second free dim: the next largest that still fits.
  size_t pdim = 0;
  for (size_t d = 0; d + 1 < n; ++d) {
    if (l.sizes[d] > l.sizes[pdim]) pdim = d;
  }
  const int64_t inner = l.sizes[n - 1];
  size_t mdim = n;  // none
  for (size_t d = 0; d + 1 < n; ++d) {
    if (d == pdim) continue;
    if (static_cast<uint64_t>(l.sizes[d] * inner) <= max_free &&
        (mdim == n || l.sizes[d] > l.sizes[mdim])) {
      mdim = d;
    }
  }
  std::vector<size_t> loops;
  for (size_t d = 0; d + 1 < n; ++d) {
    if (d != pdim && d != mdim) loops.push_back(d);
  }
  std::vector<int64_t> idx(loops.size(), 0);
  while (true) {
    for (int64_t p0 = 0; p0 < l.sizes[pdim]; p0 += max_p) {
      Tile t;
      t.partitions = static_cast<uint32_t>(std::min<int64_t>(max_p, l.sizes[pdim] - p0));
      if (mdim != n) {
        t.nfree = 2;
        t.free_sizes = {static_cast<uint32_t>(l.sizes[mdim]), static_cast<uint32_t>(inner)};
      } else {
        t.nfree = 1;
        t.free_sizes = {static_cast<uint32_t>(inner), 1};
      }
      for (size_t k = 0; k < ops; ++k) {
        TileOperand o;
        o.offset = l.base[k] + p0 * l.strides[k][pdim];
        for (size_t j = 0; j < loops.size(); ++j) o.offset += idx[j] * l.strides[k][loops[j]];
        o.partition_stride = l.strides[k][pdim];
        if (mdim != n)
          o.free_strides = {l.strides[k][mdim], l.strides[k][n - 1]};
        else
          o.free_strides = {l.strides[k][n - 1], 0};
        t.operands.push_back(o);
      }
      out.push_back(std::move(t));
    }
    size_t j = 0;
    for (; j < loops.size(); ++j) {
      if (++idx[j] < l.sizes[loops[j]]) break;
      idx[j] = 0;
    }
    if (j == loops.size()) break;
  }
}

void tile_layout(Layout l, uint32_t max_p, uint64_t max_free, std::vector<Tile>& out) {
  if (l.sizes.empty()) {
    l.sizes.push_back(1);
    for (auto& s : l.strides) s.push_back(0);
  }
  // Inner dim larger than a tile: split it, the remainder becomes its own layout.
  const size_t last = l.sizes.size() - 1;
  if (static_cast<uint64_t>(l.sizes[last]) > max_free) {
    const int64_t f = static_cast<int64_t>(max_free);
    const int64_t q = l.sizes[last] / f, rem = l.sizes[last] % f;
    if (rem) {
      Layout r = l;
      r.sizes[last] = rem;
      for (size_t k = 0; k < r.base.size(); ++k) r.base[k] += q * f * l.strides[k][last];
      l.sizes[last] = q * f;
      tile_layout(r, max_p, max_free, out);
    }
    split(l, last, f);
  }
  if (l.sizes.size() == 1) {
    l.sizes.insert(l.sizes.begin(), 1);
    for (auto& s : l.strides) s.insert(s.begin(), 0);
  }
  // Few rows but a long row: fold part of the inner dim into partitions.
  size_t n = l.sizes.size();
  int64_t outer_max = 1;
  for (size_t d = 0; d + 1 < n; ++d) outer_max = std::max(outer_max, l.sizes[d]);
  if (outer_max < static_cast<int64_t>(max_p) &&
      l.sizes[n - 1] >= 2 * static_cast<int64_t>(max_p)) {
    const int64_t r = largest_divisor_at_most(
        l.sizes[n - 1], static_cast<int64_t>(max_p) / std::max<int64_t>(1, outer_max));
    if (r > 1) {
      split(l, n - 1, l.sizes[n - 1] / r);
      // The folded part and the outer dims it continues form one partition dim when they
      // are contiguous: 32 rows x 4 folds are 128 partitions (DMA engines serve 8 each).
      Layout outer{{l.sizes.begin(), l.sizes.end() - 1}, {}, l.base};
      for (const auto& st : l.strides) outer.strides.emplace_back(st.begin(), st.end() - 1);
      coalesce(outer.sizes, outer.strides);
      if (outer.sizes.empty()) {
        outer.sizes.push_back(1);
        for (auto& st : outer.strides) st.push_back(0);
      }
      outer.sizes.push_back(l.sizes.back());
      for (size_t k = 0; k < l.strides.size(); ++k) outer.strides[k].push_back(l.strides[k].back());
      l = std::move(outer);
    }
  }
  // Many rows of a short inner dim: fold rows into a second free dim.
  n = l.sizes.size();
  size_t pdim = 0;
  for (size_t d = 0; d + 1 < n; ++d) {
    if (l.sizes[d] > l.sizes[pdim]) pdim = d;
  }
  const int64_t inner = l.sizes[n - 1];
  if (l.sizes[pdim] > static_cast<int64_t>(max_p) && static_cast<uint64_t>(inner) * 2 <= max_free) {
    const int64_t cap = std::min<int64_t>(l.sizes[pdim] / static_cast<int64_t>(max_p),
                                          static_cast<int64_t>(max_free) / inner);
    const int64_t r = largest_divisor_at_most(l.sizes[pdim], cap);
    if (r > 1) split(l, pdim, l.sizes[pdim] / r);
  }
  emit(l, max_p, max_free, out);
}

// Orders dims by the last operand's (the output's) strides, largest first, as TensorIterator
// does: a permuted output (x.t() * 2 keeps x.t()'s layout) then coalesces like a contiguous one
// and the innermost dim is the one contiguous in memory.
void order_by_output(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides) {
  if (strides.empty()) return;
  const auto& key = strides.back();
  std::vector<size_t> perm(sizes.size());
  for (size_t d = 0; d < perm.size(); ++d) perm[d] = d;
  std::stable_sort(perm.begin(), perm.end(),
                   [&](size_t x, size_t y) { return std::llabs(key[x]) > std::llabs(key[y]); });
  std::vector<int64_t> ns;
  for (size_t d : perm) ns.push_back(sizes[d]);
  for (auto& st : strides) {
    std::vector<int64_t> nst;
    for (size_t d : perm) nst.push_back(st[d]);
    st = std::move(nst);
  }
  sizes = std::move(ns);
}

}  // namespace

device_model::AccessPattern tile_ap(const TensorDesc& t, const Tile& tile, const TileOperand& o) {
  const device_model::Dim inner{o.free_strides[0], tile.free_sizes[0]};
  if (tile.nfree == 2) {
    return hbm_ap(t, o.offset, tile.partitions, o.partition_stride,
                  {inner, {o.free_strides[1], tile.free_sizes[1]}});
  }
  return hbm_ap(t, o.offset, tile.partitions, o.partition_stride, {inner});
}

void coalesce(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides) {
  std::vector<int64_t> ns;
  std::vector<std::vector<int64_t>> nst(strides.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!ns.empty()) {
      bool merge = true;
      for (size_t k = 0; k < strides.size(); ++k) {
        if (nst[k].back() != strides[k][d] * sizes[d]) merge = false;
      }
      if (merge) {
        ns.back() *= sizes[d];
        for (size_t k = 0; k < strides.size(); ++k) nst[k].back() = strides[k][d];
        continue;
      }
    }
    ns.push_back(sizes[d]);
    for (size_t k = 0; k < strides.size(); ++k) nst[k].push_back(strides[k][d]);
  }
  sizes = std::move(ns);
  strides = std::move(nst);
}

std::vector<Tile> make_tiles(const std::vector<int64_t>& sizes,
                             const std::vector<std::vector<int64_t>>& strides,
                             uint32_t max_partitions, uint64_t max_free_elements) {
  std::vector<Tile> out;
  for (int64_t s : sizes) {
    if (s == 0) return out;  // empty tensor: nothing to do
  }
  Layout l{sizes, strides, std::vector<int64_t>(strides.size(), 0)};
  order_by_output(l.sizes, l.strides);
  coalesce(l.sizes, l.strides);
  tile_layout(std::move(l), max_partitions, std::max<uint64_t>(1, max_free_elements), out);
  return out;
}

std::vector<Tile> make_transpose_tiles(const std::vector<int64_t>& sizes,
                                       const std::vector<std::vector<int64_t>>& strides,
                                       const std::vector<bool>& transposable, uint32_t edge) {
  std::vector<Tile> out;
  for (int64_t s : sizes) {
    if (s == 0) return out;
  }
  // Cheap early out (elementwise kernels call this on every launch): a transposable input
  // must differ from the output's layout somewhere.
  bool layouts_differ = false;
  for (size_t k = 0; k + 1 < strides.size(); ++k) {
    for (size_t d = 0; d < sizes.size() && transposable[k]; ++d) {
      layouts_differ |= sizes[d] > 1 && strides[k][d] != 0 && strides[k][d] != strides.back()[d];
    }
  }
  if (!layouts_differ) return out;
  std::vector<int64_t> sz = sizes;
  std::vector<std::vector<int64_t>> st = strides;
  order_by_output(sz, st);
  coalesce(sz, st);
  const size_t n = sz.size(), nops = st.size();
  if (n < 2 || nops < 2) return out;
  const auto& ost = st.back();
  size_t a = n;  // the output's contiguous dim
  for (size_t d = 0; d < n; ++d) {
    if (ost[d] == 1) a = d;
  }
  if (a == n) return out;
  size_t b = n;  // a transposable input's contiguous dim
  for (size_t k = 0; k + 1 < nops && b == n; ++k) {
    if (!transposable[k] || st[k][a] == 0 || st[k][a] == 1) continue;
    for (size_t d = 0; d < n; ++d) {
      if (d != a && st[k][d] == 1 && sz[d] > 1) b = d;
    }
  }
  if (b == n) return out;
  std::vector<size_t> loops;
  for (size_t d = 0; d < n; ++d) {
    if (d != a && d != b) loops.push_back(d);
  }
  std::vector<int64_t> idx(loops.size(), 0);
  while (true) {
    for (int64_t b0 = 0; b0 < sz[b]; b0 += edge) {
      for (int64_t a0 = 0; a0 < sz[a]; a0 += edge) {
        Tile t;
        t.partitions = static_cast<uint32_t>(std::min<int64_t>(edge, sz[b] - b0));
        t.nfree = 1;
        t.free_sizes = {static_cast<uint32_t>(std::min<int64_t>(edge, sz[a] - a0)), 1};
        for (size_t k = 0; k < nops; ++k) {
          TileOperand o;
          o.offset = b0 * st[k][b] + a0 * st[k][a];
          for (size_t j = 0; j < loops.size(); ++j) o.offset += idx[j] * st[k][loops[j]];
          o.partition_stride = st[k][b];
          o.free_strides = {st[k][a], 0};
          t.operands.push_back(o);
        }
        out.push_back(std::move(t));
      }
    }
    size_t j = 0;
    for (; j < loops.size(); ++j) {
      if (++idx[j] < sz[loops[j]]) break;
      idx[j] = 0;
    }
    if (j == loops.size()) break;
  }
  return out;
}

device_model::AccessPattern transposed_rows_ap(const TensorDesc& t, const Tile& tile,
                                               const TileOperand& o) {
  device_model::AccessPattern ap = tile_ap(t, tile, o);
  ap.partitions = tile.free_sizes[0];
  ap.partition_stride = o.free_strides[0];
  ap.dims[0] = {o.partition_stride, tile.partitions};
  return ap;
}

bool reads_transposed(const Tile& t, const TileOperand& o, uint32_t edge) {
  return t.nfree == 1 && o.partition_stride == 1 && o.free_strides[0] != 0 &&
         o.free_strides[0] != 1 && t.partitions > 1 && t.partitions <= edge &&
         t.free_sizes[0] <= edge;
}

void for_each_row_block(int64_t n, int64_t row, uint32_t partitions,
                        const std::function<void(const RowBlock&)>& fn) {
  uint64_t k = 0;
  for (int64_t i0 = 0; i0 < n; i0 += row * partitions) {
    const int64_t rows = std::min<int64_t>(partitions, (n - i0 + row - 1) / row);
    const int64_t full = (n - i0) >= rows * row ? rows : rows - 1;
    if (full > 0) fn({i0, static_cast<uint32_t>(full), static_cast<uint32_t>(row), k++});
    if (full < rows) {
      fn({i0 + full * row, 1, static_cast<uint32_t>(n - i0 - full * row), k++});
    }
  }
}

}  // namespace neuronsim::kernels
