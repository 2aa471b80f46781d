#include "neuronsim/kernels/pooling.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "conv_band.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

constexpr int64_t kBlock = 2048;  // output positions per VectorE op

// [N, C, d0, d1, d2]: an unbatched input (one dim fewer than N, C and the pooled dims) is one
// image; missing spatial dims are size 1.
TensorDesc to_5d(const TensorDesc& t, int64_t dims) {
  TensorDesc d = t;
  if (d.dim() == dims + 1) {
    d.sizes.insert(d.sizes.begin(), 1);
    d.strides.insert(d.strides.begin(), 0);
  }
  if (d.dim() != dims + 2 || dims < 1 || dims > 3) {
    throw std::invalid_argument(
        fmt::format("pooling over {} dims: operand {} has the wrong rank", dims, t.to_string()));
  }
  return conv::to_5d(d);
}

struct Geometry {
  TensorDesc x5, y5;
  conv::Axes a;
  conv::Band band;
  std::array<int64_t, 3> flat{0, 0, 0};  // flat index stride of each axis in the input
  int64_t limit = 1;
  bool variable_divisor = false;
  float divisor = 1.0f;
};

Geometry geometry(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                  const PoolSpec& s) {
  Geometry g;
  g.x5 = to_5d(in, s.dims);
  g.y5 = to_5d(out, s.dims);
  if (g.x5.sizes[0] != g.y5.sizes[0] || g.x5.sizes[1] != g.y5.sizes[1]) {
    throw std::invalid_argument(
        fmt::format("{}: input {} and output {} differ in batch or channels", name, in.to_string(),
                    out.to_string()));
  }
  int64_t volume = 1;
  for (int x = 0; x < 3; ++x) {
    conv::Axis& ax = g.a[x];
    ax.in = g.x5.sizes[2 + x];
    ax.out = g.y5.sizes[2 + x];
    const int64_t d = x - (3 - s.dims);
    if (d < 0) continue;
    ax.kernel = s.kernel[d];
    ax.stride = s.stride[d];
    ax.dilation = s.dilation[d];
    ax.low = s.padding[d];
    if (ax.kernel < 1 || ax.stride < 1 || ax.dilation < 1 || ax.low < 0) {
      throw std::invalid_argument(name + ": kernel, stride and dilation must be positive");
    }
    volume *= ax.kernel;
    const int64_t reach = ax.extent(ax.out);
    if (ax.out > 0 && reach - ax.window() >= ax.in + ax.low) {  // a window starting in padding
      throw std::invalid_argument(fmt::format("{}: output {} does not fit input {}", name,
                                              out.to_string(), in.to_string()));
    }
    if (!s.max && !s.divisor_override) {
      g.variable_divisor |=
          s.count_include_pad ? reach > ax.in + 2 * ax.low : (ax.low > 0 || reach > ax.in);
    }
  }
  g.divisor = static_cast<float>(s.divisor_override ? *s.divisor_override : volume);
  g.band.axis = conv::band_axis(g.a);
  g.band.hi = g.a[g.band.axis].out;
  for (int x = 0; x < 3; ++x) {
    g.band.ext[x] = std::max(g.a[x].extent(g.a[x].out), g.a[x].low + g.a[x].in);
  }
  g.flat = {g.a[1].in * g.a[2].in, g.a[2].in, 1};
  g.limit = std::max<int64_t>(1, std::min(kBlock, g.band.outputs(g.a)));
  return g;
}

uint64_t data_elements(const Geometry& g) {
  return static_cast<uint64_t>(g.a[0].in * g.a[1].in * g.a[2].in);
}

// The flat input index of tap (0, 0, 0) for the first output of block r, and its steps.
int32_t block_base(const Geometry& g, const conv::Rect& r) {
  int64_t v = 0;
  for (int x = 0; x < 3; ++x) v += (r.start[x] * g.a[x].stride - g.a[x].low) * g.flat[x];
  return static_cast<int32_t>(v);
}
float tap_offset(const Geometry& g, const std::array<int64_t, 3>& tap) {
  int64_t v = 0;
  for (int x = 0; x < 3; ++x) v += tap[x] * g.a[x].dilation * g.flat[x];
  return static_cast<float>(v);
}
AccessPattern iota_tile(uint32_t cw, uint64_t off, const conv::Rect& r) {
  return isa::sbuf(DType::kFp32, 0, cw, off,
                   {{r.count[1] * r.count[2], static_cast<uint32_t>(r.count[0])},
                    {r.count[2], static_cast<uint32_t>(r.count[1])},
                    {1, static_cast<uint32_t>(r.count[2])}});
}

template <typename Fn>
void for_each_tap(const conv::Axes& a, Fn&& fn) {
  bool first = true;
  for (int64_t k0 = 0; k0 < a[0].kernel; ++k0)
    for (int64_t k1 = 0; k1 < a[1].kernel; ++k1)
      for (int64_t k2 = 0; k2 < a[2].kernel; ++k2) {
        fn(std::array<int64_t, 3>{k0, k1, k2}, first);
        first = false;
      }
}

// The ones buffer the variable divisor counts: 1 where a window position counts (the input, and
// the padding when it counts), 0 elsewhere. On all partitions, once.
void fill_ones(ProgramBuilder& b, const Geometry& g, const PoolSpec& s, uint64_t ones, uint32_t P) {
  const auto& e = g.band.ext;
  b.emit(kGpSimd, isa::memset(isa::sbuf_tile(DType::kFp32, P, ones,
                                             static_cast<uint32_t>(g.band.buffer_elements())),
                              0.0f));
  std::array<int64_t, 3> lo{}, n{};
  for (int x = 0; x < 3; ++x) {
    lo[x] = s.count_include_pad ? 0 : g.a[x].low;
    n[x] =
        std::min(e[x], s.count_include_pad ? g.a[x].in + 2 * g.a[x].low : g.a[x].low + g.a[x].in) -
        lo[x];
  }
  const int64_t at = (lo[0] * e[1] + lo[1]) * e[2] + lo[2];
  b.emit(kGpSimd, isa::memset(conv::sbuf_ap(DType::kFp32, 0, P, ones + at * 4,
                                            {{e[1] * e[2], static_cast<uint32_t>(n[0])},
                                             {e[2], static_cast<uint32_t>(n[1])},
                                             {1, static_cast<uint32_t>(n[2])}}),
                              1.0f));
}

// cnt = the number of counted positions in each window of block r.
void count_windows(ProgramBuilder& b, const Geometry& g, uint32_t cw, uint64_t ones,
                   const AccessPattern& cnt, const conv::Rect& r) {
  for_each_tap(g.a, [&](const std::array<int64_t, 3>& tap, bool first) {
    const AccessPattern w = conv::window_ap(DType::kFp32, cw, ones, g.a, g.band, r, tap);
    if (first)
      b.emit(kVector, isa::tensor_copy(cnt, w));
    else
      b.emit(kVector, isa::tensor_tensor(cnt, cnt, w, AluOp::kAdd));
  });
}

}  // namespace

Program build_pooling(const std::string& name, const TensorDesc& input, const TensorDesc& out,
                      const std::optional<TensorDesc>& indices, const PoolSpec& spec,
                      const CoreParams& core) {
  const Geometry g = geometry(name, input, out, spec);
  std::optional<TensorDesc> i5;
  if (indices) i5 = to_5d(*indices, spec.dims);
  ProgramBuilder b(name, core);
  const DType dt = g.x5.dtype;
  const uint64_t es = dtype_size(dt), L = static_cast<uint64_t>(g.band.buffer_elements());
  const uint32_t P = core.sbuf.partitions;
  const uint64_t tile = static_cast<uint64_t>(g.limit) * 4;
  const uint64_t buf = b.alloc_sbuf(L * es), stage = b.alloc_sbuf(data_elements(g) * es),
                 acc_off = b.alloc_sbuf(tile), idx_off = b.alloc_sbuf(tile),
                 io_off = b.alloc_sbuf(tile), mask_off = b.alloc_sbuf(tile),
                 ones = g.variable_divisor ? b.alloc_sbuf(L * 4) : 0;
  if (g.variable_divisor) fill_ones(b, g, spec, ones, P);
  const Token ones_ready = b.mark(kGpSimd);
  const std::vector<conv::Rect> blocks = conv::make_blocks(g.a, g.band, g.limit);
  const StreamId qout = dma_queue(1);
  const int64_t N = g.x5.sizes[0], C = g.x5.sizes[1];
  Token free_all;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c0 = 0; c0 < C; c0 += P) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
      conv::BandLoad where;
      where.buffer = buf;
      where.stage = stage;
      where.zero = true;
      where.fill = spec.max ? -std::numeric_limits<float>::infinity() : 0.0f;
      const Token loaded =
          conv::load_band(b, g.x5, g.a, g.band, n, c0, cw, where, free_all, free_all, nullptr);
      for (const conv::Rect& r : blocks) {
        const uint32_t m = static_cast<uint32_t>(r.size());
        const AccessPattern acc = isa::sbuf_tile(DType::kFp32, cw, acc_off, m),
                            idx = isa::sbuf_tile(DType::kFp32, cw, idx_off, m),
                            mask = isa::sbuf_tile(DType::kFp32, cw, mask_off, m);
        if (indices) {  // the flat index of tap 0 of each output, on GpSimd meanwhile
          b.wait(kGpSimd, free_all);
          b.emit(kGpSimd, isa::iota(iota_tile(cw, io_off, r), block_base(g, r), 0,
                                    {static_cast<int32_t>(g.a[0].stride * g.flat[0]),
                                     static_cast<int32_t>(g.a[1].stride * g.flat[1]),
                                     static_cast<int32_t>(g.a[2].stride * g.flat[2])}));
        }
        const Token iota_done = b.mark(kGpSimd);
        b.wait(kVector, loaded);
        b.wait(kVector, free_all);
        b.wait(kVector, ones_ready);
        for_each_tap(g.a, [&](const std::array<int64_t, 3>& tap, bool first) {
          const AccessPattern w = conv::window_ap(dt, cw, buf, g.a, g.band, r, tap);
          if (first) {
            b.emit(kVector, isa::tensor_copy(acc, w));
            if (indices) b.emit(kVector, isa::memset(idx, tap_offset(g, tap)));
          } else if (spec.max) {
            // A later tap wins only when strictly greater (the first maximum, as on CPU).
            if (indices) {
              b.emit(kVector, isa::tensor_tensor(mask, w, acc, AluOp::kIsLe));
              b.emit(kVector, isa::select(idx, mask, idx, tap_offset(g, tap)));
            }
            b.emit(kVector, isa::tensor_tensor(acc, acc, w, AluOp::kMax));
          } else {
            b.emit(kVector, isa::tensor_tensor(acc, acc, w, AluOp::kAdd));
          }
        });
        if (!spec.max && g.variable_divisor) {
          count_windows(b, g, cw, ones, mask, r);
          b.emit(kVector, isa::tensor_tensor(acc, acc, mask, AluOp::kDivide));
        } else if (!spec.max) {
          b.emit(kVector,
                 isa::tensor_scalar(acc, acc, AluOp::kMultiply, isa::imm(1.0f / g.divisor)));
        }
        if (indices) {
          b.wait(kVector, iota_done);
          b.emit(kVector, isa::tensor_tensor(idx, idx, isa::sbuf_tile(DType::kFp32, cw, io_off, m),
                                             AluOp::kAdd));
        }
        b.wait(qout, b.mark(kVector));
        b.emit(qout, isa::dma_copy(conv::feature_ap(g.y5, n, c0, cw, r.start, r.count), acc));
        if (indices)
          b.emit(qout, isa::dma_copy(conv::feature_ap(*i5, n, c0, cw, r.start, r.count), idx));
        free_all = b.mark(qout);
      }
    }
  }
  return std::move(b).build();
}

Program build_pooling_backward(const std::string& name, const TensorDesc& grad_out,
                               const std::optional<TensorDesc>& indices,
                               const TensorDesc& grad_input, const PoolSpec& spec,
                               const CoreParams& core) {
  const Geometry g = geometry(name, grad_input, grad_out, spec);
  if (spec.max && !indices) throw std::invalid_argument(name + ": max pooling needs indices");
  std::optional<TensorDesc> i5;
  if (indices) i5 = to_5d(*indices, spec.dims);
  ProgramBuilder b(name, core);
  const uint64_t L = static_cast<uint64_t>(g.band.buffer_elements());
  const uint32_t P = core.sbuf.partitions;
  const uint64_t tile = static_cast<uint64_t>(g.limit) * 4;
  const uint64_t gbuf = b.alloc_sbuf(L * 4), g_off = b.alloc_sbuf(tile),
                 idx_off = b.alloc_sbuf(tile), io_off = b.alloc_sbuf(tile),
                 mask_off = b.alloc_sbuf(tile), ones = g.variable_divisor ? b.alloc_sbuf(L * 4) : 0;
  if (g.variable_divisor) fill_ones(b, g, spec, ones, P);
  const Token ones_ready = b.mark(kGpSimd);
  const std::vector<conv::Rect> blocks = conv::make_blocks(g.a, g.band, g.limit);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  const int64_t N = g.x5.sizes[0], C = g.x5.sizes[1];
  const auto& e = g.band.ext;
  Token free_all;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c0 = 0; c0 < C; c0 += P) {
      const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
      b.wait(kVector, free_all);
      b.emit(kVector,
             isa::memset(isa::sbuf_tile(DType::kFp32, cw, gbuf, static_cast<uint32_t>(L)), 0.0f));
      for (const conv::Rect& r : blocks) {
        const uint32_t m = static_cast<uint32_t>(r.size());
        const AccessPattern gt = isa::sbuf_tile(DType::kFp32, cw, g_off, m),
                            idx = isa::sbuf_tile(DType::kFp32, cw, idx_off, m),
                            mask = isa::sbuf_tile(DType::kFp32, cw, mask_off, m);
        b.wait(qin, b.mark(kVector));
        b.emit(qin, isa::dma_copy(gt, conv::feature_ap(g.y5, n, c0, cw, r.start, r.count)));
        if (indices) {
          b.emit(qin, isa::dma_copy(idx, conv::feature_ap(*i5, n, c0, cw, r.start, r.count)));
          b.wait(kGpSimd, b.mark(kVector));
          b.emit(kGpSimd, isa::iota(iota_tile(cw, io_off, r), block_base(g, r), 0,
                                    {static_cast<int32_t>(g.a[0].stride * g.flat[0]),
                                     static_cast<int32_t>(g.a[1].stride * g.flat[1]),
                                     static_cast<int32_t>(g.a[2].stride * g.flat[2])}));
          b.wait(kVector, b.mark(kGpSimd));
        }
        b.wait(kVector, b.mark(qin));
        b.wait(kVector, ones_ready);
        if (indices) {  // the winning tap's offset
          b.emit(kVector, isa::tensor_tensor(idx, idx, isa::sbuf_tile(DType::kFp32, cw, io_off, m),
                                             AluOp::kSubtract));
        }
        if (!spec.max && g.variable_divisor) {
          count_windows(b, g, cw, ones, mask, r);
          b.emit(kVector, isa::tensor_tensor(gt, gt, mask, AluOp::kDivide));
        } else if (!spec.max) {
          b.emit(kVector, isa::tensor_scalar(gt, gt, AluOp::kMultiply, isa::imm(1.0f / g.divisor)));
        }
        for_each_tap(g.a, [&](const std::array<int64_t, 3>& tap, bool) {
          const AccessPattern w = conv::window_ap(DType::kFp32, cw, gbuf, g.a, g.band, r, tap);
          if (spec.max) {
            b.emit(kVector,
                   isa::tensor_scalar(mask, idx, AluOp::kIsEqual, isa::imm(tap_offset(g, tap))));
            b.emit(kVector, isa::tensor_tensor(mask, mask, gt, AluOp::kMultiply));
            b.emit(kVector, isa::tensor_tensor(w, w, mask, AluOp::kAdd));
          } else {
            b.emit(kVector, isa::tensor_tensor(w, w, gt, AluOp::kAdd));
          }
        });
      }
      // The input region of the buffer is the gradient.
      const int64_t at = (g.a[0].low * e[1] + g.a[1].low) * e[2] + g.a[2].low;
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(conv::feature_ap(g.x5, n, c0, cw, {0, 0, 0},
                                                  {g.a[0].in, g.a[1].in, g.a[2].in}),
                                 conv::sbuf_ap(DType::kFp32, 0, cw, gbuf + at * 4,
                                               {{e[1] * e[2], static_cast<uint32_t>(g.a[0].in)},
                                                {e[2], static_cast<uint32_t>(g.a[1].in)},
                                                {1, static_cast<uint32_t>(g.a[2].in)}})));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

bool pooling_fits(const std::vector<int64_t>& input, const std::vector<int64_t>& out,
                  const PoolSpec& spec, const CoreParams& core) {
  auto dense = [](const std::vector<int64_t>& sizes) {
    TensorDesc d;
    d.sizes = sizes;
    d.strides.assign(sizes.size(), 1);
    for (int64_t k = static_cast<int64_t>(sizes.size()) - 2; k >= 0; --k)
      d.strides[k] = d.strides[k + 1] * std::max<int64_t>(sizes[k + 1], 1);
    return d;
  };
  try {
    const Geometry g = geometry("pooling", dense(input), dense(out), spec);
    const uint64_t L = static_cast<uint64_t>(g.band.buffer_elements());
    const uint64_t tiles = 4 * static_cast<uint64_t>(g.limit) * 4;
    const uint64_t fwd = L * 4 + data_elements(g) * 4 + tiles;
    const uint64_t bwd = L * 4 + tiles;
    const uint64_t ones = g.variable_divisor ? L * 4 : 0;
    return std::max(fwd, bwd) + ones + 4096 <= core.sbuf.partition_bytes * 3 / 4 &&
           L <= core.vector.max_free_elements_sbuf;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace neuronsim::kernels
