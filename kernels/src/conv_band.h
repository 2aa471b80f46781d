#pragma once
// Shared by the convolution programs (private to the kernel library): the geometry of one
// spatial axis of a convolution read from a zero-padded SBUF buffer, bands of output rows whose
// input fits SBUF, rectangular blocks of output positions, and the program fragment that loads a
// band of a feature map into such a buffer.
#include <array>
#include <cstdint>
#include <vector>

#include "neuronsim/device_model/access_pattern.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels::conv {

/// One spatial axis. Input element i sits at buffer position low + i * spread (spread > 1:
/// zeros between elements, as a transposed convolution reads its input); output position o
/// reads taps o * stride + k * dilation, k < kernel.
struct Axis {
  int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, spread = 1, low = 0;
  int64_t window() const { return dilation * (kernel - 1) + 1; }
  /// Buffer positions `outs` consecutive outputs read.
  int64_t extent(int64_t outs) const { return (outs - 1) * stride + window(); }
};
using Axes = std::array<Axis, 3>;

/// Output rows [lo, hi) along `axis` and the buffer they read: extents per axis, the band axis
/// starting at buffer position `base`. The other axes are whole, but for the innermost when
/// the band axis is another one and cols_hi >= 0: output columns [cols_lo, cols_hi), their
/// buffer starting at position cols_base (rows too wide for SBUF are split into column tiles).
struct Band {
  int axis = 2;
  int64_t lo = 0, hi = 1;
  std::array<int64_t, 3> ext{1, 1, 1};
  int64_t base = 0;
  int64_t cols_lo = 0, cols_hi = -1, cols_base = 0;
  bool col_tiled() const { return axis != 2 && cols_hi >= 0; }
  /// Where the band's outputs start (row-major layout origin).
  std::array<int64_t, 3> origin() const;
  /// The buffer position of output 0 of axis x (band axis: base, column tile: cols_base).
  int64_t base_of(int x) const {
    return x == axis ? base : (x == 2 && col_tiled() ? cols_base : 0);
  }
  int64_t buffer_elements() const { return ext[0] * ext[1] * ext[2]; }
  /// Output positions of the band (row-major over the three axes).
  std::array<int64_t, 3> out_counts(const Axes& a) const;
  int64_t outputs(const Axes& a) const;
};

/// The axis bands run along: the first with more than one output.
int band_axis(const Axes& a);
/// Bands of at most `rows` output rows covering the band axis; cols > 0 (and a band axis other
/// than the innermost): each band split into tiles of at most `cols` output columns.
std::vector<Band> make_bands(const Axes& a, int64_t rows, int64_t cols = 0);

/// The input elements of one axis that land in a band's buffer: the first input index, how
/// many, and the buffer position of the first.
struct Span {
  int64_t first = 0, count = 0, pos = 0;
};
Span data_span(const Axis& ax, int64_t ext, int64_t base);
/// Elements a band's data occupies (what a staging copy of it holds).
int64_t data_elements(const Axes& a, const Band& band);
/// True when every buffer position of the band holds an input element (no padding, no spread).
bool covers(const Axes& a, const Band& band);

/// A box of output positions: a contiguous run of the band's row-major output layout starting
/// at element `offset`.
struct Rect {
  std::array<int64_t, 3> start{0, 0, 0}, count{1, 1, 1};
  int64_t offset = 0;
  int64_t size() const { return count[0] * count[1] * count[2]; }
};
/// Blocks of at most `limit` positions covering the band.
std::vector<Rect> make_blocks(const Axes& a, const Band& band, int64_t limit);

/// A tensor with its spatial dims padded to three (size-1 dims inserted after the channels).
TensorDesc to_5d(const TensorDesc& t);

/// `base` with free dims `dims` (outermost first): size-1 dims dropped, neighbours that walk
/// memory contiguously merged. Throws if more than four remain.
device_model::AccessPattern with_dims(device_model::AccessPattern base,
                                      const std::vector<device_model::Dim>& dims);
/// An SBUF access pattern on partitions [start, start + partitions).
device_model::AccessPattern sbuf_ap(device_model::DType t, uint32_t start, uint32_t partitions,
                                    uint64_t offset, const std::vector<device_model::Dim>& dims);

/// Where a band load goes: a buffer (padded layout) and a staging area for the raw data, both
/// byte offsets in every partition; the DMA queue and the engine that pads.
struct BandLoad {
  uint64_t buffer = 0, stage = 0;
  StreamId dma = dma_queue(0);
  StreamId engine = kGpSimd;
  bool zero = false;  // memset the buffer before the copy (padding not constant across bands)
  float fill = 0.0f;  // the padding value (pooling: -inf for max)
};

/// Emits the load of channels [c0, c0 + cw) of image n of `t` (5-d) into the buffer on
/// partitions [0, cw): straight from HBM when the band has no padding, else through staging and
/// a strided engine copy. Waits for `buffer_free` before writing the buffer and `stage_free`
/// before writing staging; returns the token of the buffer's last writer. `stage_done` gets the
/// token after which staging may be reused.
ProgramBuilder::Token load_band(ProgramBuilder& b, const TensorDesc& t, const Axes& a,
                                const Band& band, int64_t n, int64_t c0, uint32_t cw,
                                const BandLoad& where, ProgramBuilder::Token buffer_free,
                                ProgramBuilder::Token stage_free,
                                ProgramBuilder::Token* stage_done);

/// The access pattern of a window of the buffer: output box `r` of band `band`, tap offset
/// (k0, k1, k2), on partitions [0, partitions).
device_model::AccessPattern window_ap(device_model::DType t, uint32_t partitions, uint64_t buffer,
                                      const Axes& a, const Band& band, const Rect& r,
                                      const std::array<int64_t, 3>& tap);

/// The HBM access pattern of output box `counts` at `start` of channels [c0, c0 + cw) of image
/// n of `t` (5-d), channels on partitions.
device_model::AccessPattern feature_ap(const TensorDesc& t, int64_t n, int64_t c0, uint32_t cw,
                                       const std::array<int64_t, 3>& start,
                                       const std::array<int64_t, 3>& counts);

}  // namespace neuronsim::kernels::conv
