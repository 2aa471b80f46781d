#include "conv_band.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels::conv {

using namespace device_model;
using Token = ProgramBuilder::Token;

std::array<int64_t, 3> Band::out_counts(const Axes& a) const {
  std::array<int64_t, 3> c{};
  for (int x = 0; x < 3; ++x) c[x] = x == axis ? hi - lo : a[x].out;
  if (col_tiled()) c[2] = cols_hi - cols_lo;
  return c;
}

std::array<int64_t, 3> Band::origin() const {
  std::array<int64_t, 3> o{0, 0, 0};
  o[axis] = lo;
  if (col_tiled()) o[2] = cols_lo;
  return o;
}

int64_t Band::outputs(const Axes& a) const {
  const auto c = out_counts(a);
  return c[0] * c[1] * c[2];
}

int band_axis(const Axes& a) {
  for (int x = 0; x < 2; ++x) {
    if (a[x].out > 1) return x;
  }
  return 2;
}

std::vector<Band> make_bands(const Axes& a, int64_t rows, int64_t cols) {
  const int axis = band_axis(a);
  const bool split = cols > 0 && axis != 2 && cols < a[2].out;
  const int64_t step = split ? cols : std::max<int64_t>(a[2].out, 1);
  std::vector<Band> bands;
  for (int64_t lo = 0; lo < a[axis].out; lo += rows) {
    for (int64_t c0 = 0; c0 < std::max<int64_t>(a[2].out, 1); c0 += step) {
      Band b;
      b.axis = axis;
      b.lo = lo;
      b.hi = std::min(lo + rows, a[axis].out);
      for (int x = 0; x < 3; ++x) b.ext[x] = a[x].extent(x == axis ? b.hi - b.lo : a[x].out);
      b.base = lo * a[axis].stride;
      if (split) {
        b.cols_lo = c0;
        b.cols_hi = std::min(c0 + cols, a[2].out);
        b.cols_base = c0 * a[2].stride;
        b.ext[2] = a[2].extent(b.cols_hi - b.cols_lo);
      }
      bands.push_back(b);
    }
  }
  return bands;
}

Span data_span(const Axis& ax, int64_t ext, int64_t base) {
  Span s;
  const int64_t lo_num = base - ax.low;
  s.first = lo_num <= 0 ? 0 : (lo_num + ax.spread - 1) / ax.spread;
  const int64_t hi_num = ext - 1 + base - ax.low;
  const int64_t last = hi_num < 0 ? -1 : std::min(ax.in - 1, hi_num / ax.spread);
  s.count = std::max<int64_t>(0, last - s.first + 1);
  s.pos = ax.low + s.first * ax.spread - base;
  return s;
}

namespace {

std::array<Span, 3> spans(const Axes& a, const Band& band) {
  std::array<Span, 3> s;
  for (int x = 0; x < 3; ++x) {
    s[x] = data_span(a[x], band.ext[x], band.base_of(x));
  }
  return s;
}

}  // namespace

int64_t data_elements(const Axes& a, const Band& band) {
  const auto s = spans(a, band);
  return s[0].count * s[1].count * s[2].count;
}

bool covers(const Axes& a, const Band& band) {
  const auto s = spans(a, band);
  for (int x = 0; x < 3; ++x) {
    if (s[x].pos != 0 || s[x].count != band.ext[x]) return false;
    if (a[x].spread != 1 && s[x].count > 1) return false;
  }
  return true;
}

std::vector<Rect> make_blocks(const Axes& a, const Band& band, int64_t limit) {
  const auto c = band.out_counts(a);
  const std::array<int64_t, 3> origin = band.origin();
  std::vector<Rect> out;
  auto add = [&](int64_t i0, int64_t n0, int64_t i1, int64_t n1, int64_t i2, int64_t n2) {
    Rect r;
    r.start = {origin[0] + i0, origin[1] + i1, origin[2] + i2};
    r.count = {n0, n1, n2};
    r.offset = (i0 * c[1] + i1) * c[2] + i2;
    out.push_back(r);
  };
  if (c[2] > limit) {
    for (int64_t i0 = 0; i0 < c[0]; ++i0)
      for (int64_t i1 = 0; i1 < c[1]; ++i1)
        for (int64_t i2 = 0; i2 < c[2]; i2 += limit)
          add(i0, 1, i1, 1, i2, std::min(limit, c[2] - i2));
  } else if (c[1] * c[2] > limit) {
    const int64_t rows = limit / c[2];
    for (int64_t i0 = 0; i0 < c[0]; ++i0)
      for (int64_t i1 = 0; i1 < c[1]; i1 += rows)
        add(i0, 1, i1, std::min(rows, c[1] - i1), 0, c[2]);
  } else {
    const int64_t planes = limit / (c[1] * c[2]);
    for (int64_t i0 = 0; i0 < c[0]; i0 += planes)
      add(i0, std::min(planes, c[0] - i0), 0, c[1], 0, c[2]);
  }
  return out;
}

TensorDesc to_5d(const TensorDesc& t) {
  if (t.dim() < 3 || t.dim() > 5) {
    throw std::invalid_argument(
        fmt::format("convolution operand {} needs 3 to 5 dims", t.to_string()));
  }
  TensorDesc d = t;
  while (d.dim() < 5) {
    d.sizes.insert(d.sizes.begin() + 2, 1);
    d.strides.insert(d.strides.begin() + 2, 0);
  }
  return d;
}

AccessPattern with_dims(AccessPattern base, const std::vector<Dim>& dims) {
  std::vector<Dim> kept;
  for (const Dim& d : dims) {
    if (d.size > 1) kept.push_back(d);
  }
  std::vector<Dim> merged;  // innermost first while merging
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (!merged.empty() && it->stride == merged.back().stride * merged.back().size) {
      merged.back().size *= it->size;
    } else {
      merged.push_back(*it);
    }
  }
  if (merged.size() > static_cast<size_t>(kMaxFreeDims)) {
    throw std::invalid_argument(fmt::format("access pattern needs {} free dims", merged.size()));
  }
  base.ndims = static_cast<uint8_t>(merged.size());
  for (size_t k = 0; k < merged.size(); ++k) base.dims[k] = merged[merged.size() - 1 - k];
  return base;
}

AccessPattern sbuf_ap(DType t, uint32_t start, uint32_t partitions, uint64_t offset,
                      const std::vector<Dim>& dims) {
  return with_dims(isa::sbuf(t, start, partitions, offset, {}), dims);
}

namespace {

int64_t elem_offset(const TensorDesc& t, int64_t n, int64_t c0,
                    const std::array<int64_t, 3>& start) {
  return n * t.strides[0] + c0 * t.strides[1] + start[0] * t.strides[2] + start[1] * t.strides[3] +
         start[2] * t.strides[4];
}

}  // namespace

AccessPattern feature_ap(const TensorDesc& t, int64_t n, int64_t c0, uint32_t cw,
                         const std::array<int64_t, 3>& start,
                         const std::array<int64_t, 3>& counts) {
  AccessPattern base = hbm_ap(t, elem_offset(t, n, c0, start), cw, t.strides[1], {});
  return with_dims(base, {{t.strides[2], static_cast<uint32_t>(counts[0])},
                          {t.strides[3], static_cast<uint32_t>(counts[1])},
                          {t.strides[4], static_cast<uint32_t>(counts[2])}});
}

Token load_band(ProgramBuilder& b, const TensorDesc& t, const Axes& a, const Band& band, int64_t n,
                int64_t c0, uint32_t cw, const BandLoad& where, Token buffer_free, Token stage_free,
                Token* stage_done) {
  const DType dt = t.dtype;
  const uint64_t es = dtype_size(dt);
  const auto s = spans(a, band);
  const uint32_t L = static_cast<uint32_t>(band.buffer_elements());
  const std::array<int64_t, 3> first{s[0].first, s[1].first, s[2].first};
  const std::array<int64_t, 3> cnt{s[0].count, s[1].count, s[2].count};
  const int64_t data = cnt[0] * cnt[1] * cnt[2];
  if (data == 0) {  // the band reads padding only
    b.wait(where.engine, buffer_free);
    b.emit(where.engine, isa::memset(isa::sbuf_tile(dt, cw, where.buffer, L), where.fill));
    const Token t_done = b.mark(where.engine);
    if (stage_done) *stage_done = t_done;
    return t_done;
  }
  const AccessPattern src = feature_ap(t, n, c0, cw, first, cnt);
  if (covers(a, band)) {
    b.wait(where.dma, buffer_free);
    b.emit(where.dma, isa::dma_copy(isa::sbuf_tile(dt, cw, where.buffer, L), src));
    return b.mark(where.dma);
  }
  b.wait(where.dma, stage_free);
  const AccessPattern stage = isa::sbuf_tile(dt, cw, where.stage, static_cast<uint32_t>(data));
  b.emit(where.dma, isa::dma_copy(stage, src));
  const Token staged = b.mark(where.dma);
  b.wait(where.engine, staged);
  b.wait(where.engine, buffer_free);
  if (where.zero)
    b.emit(where.engine, isa::memset(isa::sbuf_tile(dt, cw, where.buffer, L), where.fill));
  const int64_t pos = (s[0].pos * band.ext[1] + s[1].pos) * band.ext[2] + s[2].pos;
  const AccessPattern dst =
      sbuf_ap(dt, 0, cw, where.buffer + static_cast<uint64_t>(pos) * es,
              {{a[0].spread * band.ext[1] * band.ext[2], static_cast<uint32_t>(cnt[0])},
               {a[1].spread * band.ext[2], static_cast<uint32_t>(cnt[1])},
               {a[2].spread, static_cast<uint32_t>(cnt[2])}});
  b.emit(where.engine, isa::tensor_copy(dst, stage));
  const Token done = b.mark(where.engine);
  if (stage_done) *stage_done = done;
  return done;
}

AccessPattern window_ap(DType t, uint32_t partitions, uint64_t buffer, const Axes& a,
                        const Band& band, const Rect& r, const std::array<int64_t, 3>& tap) {
  std::array<int64_t, 3> p{};
  for (int x = 0; x < 3; ++x) {
    p[x] = r.start[x] * a[x].stride + tap[x] * a[x].dilation - band.base_of(x);
  }
  const int64_t flat = (p[0] * band.ext[1] + p[1]) * band.ext[2] + p[2];
  return sbuf_ap(t, 0, partitions, buffer + static_cast<uint64_t>(flat) * dtype_size(t),
                 {{a[0].stride * band.ext[1] * band.ext[2], static_cast<uint32_t>(r.count[0])},
                  {a[1].stride * band.ext[2], static_cast<uint32_t>(r.count[1])},
                  {a[2].stride, static_cast<uint32_t>(r.count[2])}});
}

}  // namespace neuronsim::kernels::conv
