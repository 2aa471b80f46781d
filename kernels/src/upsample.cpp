#include "neuronsim/kernels/upsample.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "conv_band.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

// `count` runs of `len` output positions, run k at [dst0 + k * len, ...) reading input position
// src0 + k * step.
struct Segment {
  int64_t src0 = 0, step = 1, dst0 = 0, count = 1, len = 1;
};

// The source position of every output position along one dim, as segments.
std::vector<Segment> segments(const std::vector<int64_t>& map) {
  struct Run {
    int64_t src, dst0, len;
  };
  std::vector<Run> runs;
  for (int64_t o = 0; o < static_cast<int64_t>(map.size()); ++o) {
    if (!runs.empty() && runs.back().src == map[o])
      ++runs.back().len;
    else
      runs.push_back({map[o], o, 1});
  }
  std::vector<Segment> segs;
  for (const Run& r : runs) {
    if (!segs.empty()) {
      Segment& s = segs.back();
      const int64_t step = r.src - (s.src0 + (s.count - 1) * s.step);
      if (r.len == s.len && (s.count == 1 ? step > 0 : step == s.step)) {
        s.step = step;
        ++s.count;
        continue;
      }
    }
    segs.push_back({r.src, 1, r.dst0, 1, r.len});
  }
  return segs;
}

// PyTorch's source-index scale (area_pixel_compute_scale / compute_scales_value) in fp32.
float ratio_of(const UpsampleSpec& s, int64_t d) {
  const int64_t in = s.in[d], out = s.out[d];
  if (s.linear && s.align_corners) {
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  }
  if (s.linear && in == out) return 1.0f;  // PyTorch copies (whatever the scale argument)
  const std::optional<double>& sc = s.scales[d];
  return sc && *sc > 0 ? static_cast<float>(1.0 / *sc)
                       : static_cast<float>(in) / static_cast<float>(out);
}

// Nearest: upsample's nearest_idx. Linear: the first tap (the floor of the source index) or the
// second (`second`: the next position, or the same one at the edge).
std::vector<int64_t> source_map(const UpsampleSpec& s, int64_t d, bool second) {
  const int64_t in = s.in[d], out = s.out[d];
  const float r = ratio_of(s, d);
  std::vector<int64_t> map(out);
  for (int64_t o = 0; o < out; ++o) {
    if (!s.linear) {
      if (in == out)
        map[o] = o;
      else if (out == 2 * in)
        map[o] = o >> 1;
      else
        map[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * r)), in - 1);
      continue;
    }
    float real = 0.0f;
    if (s.align_corners) {
      real = r * static_cast<float>(o);
    } else {
      const float half = static_cast<float>(o) + 0.5f;
      const float scaled = r * half;
      real = std::max(scaled - 0.5f, 0.0f);
    }
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    map[o] = second ? i0 + (i0 < in - 1 ? 1 : 0) : i0;
  }
  return map;
}

int64_t product(const std::array<int64_t, 3>& a, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t i = from; i < to; ++i) p *= a[i];
  return p;
}

// The extents after the forward's stages for dims > d have run (and before the stage of d).
std::array<int64_t, 3> extents_before(const UpsampleSpec& s, int64_t d) {
  std::array<int64_t, 3> e = s.in;
  for (int64_t k = d + 1; k < s.dims; ++k) e[k] = s.out[k];
  return e;
}

struct Layout {
  int64_t s_in = 1, s_out = 1, mid = 1;  // per-plane elements: input, output, largest stage
  int64_t lambdas = 0;                   // fp32 weights per partition (bilinear)
};

Layout layout_of(const UpsampleSpec& s) {
  Layout l;
  l.s_in = product(s.in, 0, s.dims);
  l.s_out = product(s.out, 0, s.dims);
  l.mid = std::max(l.s_in, l.s_out);
  for (int64_t d = 0; d < s.dims; ++d) {
    std::array<int64_t, 3> e = extents_before(s, d);
    l.mid = std::max(l.mid, product(e, 0, s.dims));
    e[d] = s.out[d];
    l.mid = std::max(l.mid, product(e, 0, s.dims));
    if (s.linear) l.lambdas += 2 * s.out[d];
  }
  return l;
}

void check(const std::string& name, const TensorDesc& t, const UpsampleSpec& s, bool out_side,
           const char* role) {
  bool ok = t.dim() == s.dims + 2 && t.sizes[0] * t.sizes[1] == s.planes;
  for (int64_t d = 0; ok && d < s.dims; ++d) ok = t.sizes[2 + d] == (out_side ? s.out : s.in)[d];
  if (!ok) {
    throw std::invalid_argument(
        fmt::format("{}: {} {} does not match the spec", name, role, t.to_string()));
  }
}

// One dim's view of a plane buffer: [A, L, B] with the dim in the middle.
struct View {
  uint64_t off = 0;
  int64_t A = 1, L = 1, B = 1;
};

class Emitter {
 public:
  Emitter(ProgramBuilder& b, const UpsampleSpec& s, uint32_t p, uint64_t lambda_off)
      : b_(b), s_(s), p_(p), lambda_off_(lambda_off) {}

  AccessPattern ap(uint64_t off, const std::vector<Dim>& dims) const {
    return conv::sbuf_ap(DType::kFp32, 0, p_, off, dims);
  }
  // Outer dims (size-1 ones dropped, none merged) around an innermost dim that is reduced.
  AccessPattern reduce_ap(uint64_t off, const std::vector<Dim>& outer, Dim inner) const {
    AccessPattern a = isa::sbuf(DType::kFp32, 0, p_, off, {});
    for (const Dim& d : outer) {
      if (d.size > 1) a.dims[a.ndims++] = d;
    }
    a.dims[a.ndims++] = inner;
    return a;
  }
  AccessPattern flat(uint64_t off, int64_t n) const { return ap(off, {{1, u32(n)}}); }
  static uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
  /// The partitions (planes) of the next tile.
  void set_partitions(uint32_t p) { p_ = p; }

  // dst[a, o, b] = src[a, map(o), b] for every segment of `map`.
  void gather(const View& dst, const View& src, const std::vector<Segment>& segs) {
    for (const Segment& g : segs) {
      const int64_t B = dst.B;
      b_.emit(kVector, isa::tensor_copy(ap(dst.off + g.dst0 * B * 4, {{dst.L * B, u32(dst.A)},
                                                                      {g.len * B, u32(g.count)},
                                                                      {B, u32(g.len)},
                                                                      {1, u32(B)}}),
                                        ap(src.off + g.src0 * B * 4, {{src.L * B, u32(src.A)},
                                                                      {g.step * B, u32(g.count)},
                                                                      {0, u32(g.len)},
                                                                      {1, u32(B)}})));
    }
  }

  // dst[a, map(o), b] += src[a, o, b] summed over each run (dst already initialised); `tmp`
  // holds one segment's sums.
  void scatter_add(const View& dst, const View& src, const std::vector<Segment>& segs,
                   uint64_t tmp) {
    for (const Segment& g : segs) {
      const int64_t B = src.B;
      const AccessPattern sums = ap(tmp, {{1, u32(dst.A * g.count * B)}});
      b_.emit(kVector,
              isa::tensor_reduce(
                  sums,
                  reduce_ap(src.off + g.dst0 * B * 4,
                            {{src.L * B, u32(src.A)}, {g.len * B, u32(g.count)}, {1, u32(B)}},
                            {B, u32(g.len)}),
                  ReduceOp::kAdd));
      const AccessPattern into =
          ap(dst.off + g.src0 * B * 4,
             {{dst.L * B, u32(dst.A)}, {g.step * B, u32(g.count)}, {1, u32(B)}});
      b_.emit(kVector, isa::tensor_tensor(into, into, sums, AluOp::kAdd));
    }
  }

  // The two bilinear weights of dim d's output positions ([out[d]] per partition, from an
  // iota): lambda1 = frac(source index), lambda0 = 1 - lambda1, as PyTorch computes them.
  void emit_lambdas() {
    uint64_t off = lambda_off_;
    for (int64_t d = 0; d < s_.dims; ++d) {
      const int64_t n = s_.out[d];
      const AccessPattern l0 = flat(off, n), l1 = flat(off + n * 4, n);
      lambda0_[d] = off;
      lambda1_[d] = off + n * 4;
      off += 2 * n * 4;
      const float r = ratio_of(s_, d);
      b_.emit(kGpSimd, isa::iota(l1, 0, 0, {1}));
      b_.wait(kVector, b_.mark(kGpSimd));
      if (s_.align_corners) {
        b_.emit(kVector, isa::tensor_scalar(l1, l1, AluOp::kMultiply, isa::imm(r)));
      } else {
        b_.emit(kVector, isa::tensor_scalar(l1, l1, AluOp::kAdd, isa::imm(0.5f), AluOp::kMultiply,
                                            isa::imm(r)));
        b_.emit(kVector, isa::tensor_scalar(l1, l1, AluOp::kSubtract, isa::imm(0.5f), AluOp::kMax,
                                            isa::imm(0.0f)));
      }
      b_.emit(kVector, isa::tensor_scalar(l1, l1, AluOp::kMod, isa::imm(1.0f)));
      b_.emit(kVector, isa::tensor_scalar(l0, l1, AluOp::kMultiply, isa::imm(-1.0f), AluOp::kAdd,
                                          isa::imm(1.0f)));
    }
  }

  // A view's elements times dim d's weight of their position along L.
  AccessPattern lambda_spread(const View& v, int64_t d, bool second) const {
    return ap((second ? lambda1_ : lambda0_)[d], {{0, u32(v.A)}, {1, u32(v.L)}, {0, u32(v.B)}});
  }

 private:
  ProgramBuilder& b_;
  const UpsampleSpec& s_;
  uint32_t p_;
  uint64_t lambda_off_;
  std::array<uint64_t, 3> lambda0_{}, lambda1_{};
};

struct Buffers {
  uint64_t x = 0, y = 0, t[2] = {0, 0}, u = 0, lambdas = 0;
};

Buffers alloc(ProgramBuilder& b, const Layout& l) {
  Buffers f;
  f.x = b.alloc_sbuf(static_cast<uint64_t>(l.s_in) * 4);
  f.y = b.alloc_sbuf(static_cast<uint64_t>(l.s_out) * 4);
  f.t[0] = b.alloc_sbuf(static_cast<uint64_t>(l.mid) * 4);
  f.t[1] = b.alloc_sbuf(static_cast<uint64_t>(l.mid) * 4);
  f.u = b.alloc_sbuf(static_cast<uint64_t>(l.mid) * 4);
  f.lambdas = b.alloc_sbuf(static_cast<uint64_t>(std::max<int64_t>(l.lambdas, 1)) * 4);
  return f;
}

// Planes [q0, q0 + p) of an [N, C, *spatial] tensor, each plane's spatial elements in order:
// one access pattern when the (n, c) planes are one stride apart, else one per run of planes
// within one n (a channel slice of a larger tensor, as cat's backward hands over). `first`:
// each run's first partition within the tile.
struct PlaneRun {
  uint32_t first;
  AccessPattern hbm;
};

std::vector<PlaneRun> plane_runs(const TensorDesc& t, int64_t q0, uint32_t p) {
  std::vector<Dim> dims;
  for (int64_t d = 2; d < t.dim(); ++d)
    dims.push_back({t.strides[d], static_cast<uint32_t>(t.sizes[d])});
  if (upsample_planes_mergeable(t.sizes, t.strides)) {
    const int64_t ps = t.sizes[1] == 1 ? t.strides[0] : t.strides[1];
    return {{0, conv::with_dims(hbm_ap(t, q0 * ps, p, ps, {}), dims)}};
  }
  std::vector<PlaneRun> runs;
  const int64_t C = t.sizes[1];
  for (int64_t q = q0; q < q0 + p;) {
    const int64_t n = q / C, c = q % C;
    const int64_t len = std::min<int64_t>(C - c, q0 + p - q);
    const AccessPattern ap = hbm_ap(t, n * t.strides[0] + c * t.strides[1],
                                    static_cast<uint32_t>(len), t.strides[1], {});
    runs.push_back({static_cast<uint32_t>(q - q0), conv::with_dims(ap, dims)});
    q += len;
  }
  return runs;
}

// Partitions [first, first + count) of a tile's access pattern.
AccessPattern partition_slice(AccessPattern ap, uint32_t first, uint32_t count) {
  ap.start_partition += first;
  ap.partitions = count;
  return ap;
}

void check_spec(const std::string& name, const UpsampleSpec& s, const CoreParams& core) {
  if (!upsample_fits(s, core)) {
    throw std::invalid_argument(fmt::format("{}: {} planes of {}x{}x{} -> {}x{}x{} not supported",
                                            name, s.planes, s.in[0], s.in[1], s.in[2], s.out[0],
                                            s.out[1], s.out[2]));
  }
}

}  // namespace

bool upsample_planes_mergeable(const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides) {
  return sizes.size() >= 3 && sizes.size() == strides.size() &&
         (sizes[0] == 1 || sizes[1] == 1 || strides[0] == sizes[1] * strides[1]);
}

bool upsample_fits(const UpsampleSpec& s, const CoreParams& core) {
  if (s.dims < 1 || s.dims > 3 || (s.linear && s.dims != 2) || s.planes < 0) return false;
  for (int64_t d = 0; d < s.dims; ++d) {
    if (s.in[d] < 1 || s.out[d] < 1) return false;
  }
  const Layout l = layout_of(s);
  if (l.mid > static_cast<int64_t>(core.vector.max_free_elements_sbuf)) return false;
  const int64_t bytes = (l.s_in + l.s_out + 3 * l.mid + l.lambdas) * 4 + 6 * 64;
  return bytes <= static_cast<int64_t>(core.sbuf.partition_bytes * 3 / 4);
}

// The frame both directions share: per 128 planes, one load from HBM into x (forward) or y
// (backward), the per-dim stages (`stages(b, em, f, first, second)`), one store of the other
// buffer back to HBM.
template <typename Stages>
Program build_planes(const std::string& name, const UpsampleSpec& s, const CoreParams& core,
                     const TensorDesc& from, const TensorDesc& to, bool backward, Stages&& stages) {
  const Layout l = layout_of(s);
  ProgramBuilder b(name, core);
  const Buffers f = alloc(b, l);
  const uint32_t P = core.sbuf.partitions;
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  Emitter em(b, s, P, f.lambdas);
  if (s.linear) em.emit_lambdas();
  std::array<std::vector<Segment>, 3> first, second;
  for (int64_t d = 0; d < s.dims; ++d) {
    first[d] = segments(source_map(s, d, false));
    if (s.linear) second[d] = segments(source_map(s, d, true));
  }
  const uint64_t load = backward ? f.y : f.x, store = backward ? f.x : f.y;
  const int64_t load_len = backward ? l.s_out : l.s_in, store_len = backward ? l.s_in : l.s_out;
  Token free_all = b.mark(kVector);
  for (int64_t q0 = 0; q0 < s.planes; q0 += P) {
    const uint32_t p = static_cast<uint32_t>(std::min<int64_t>(P, s.planes - q0));
    em.set_partitions(p);
    b.wait(qin, free_all);
    for (const PlaneRun& r : plane_runs(from, q0, p)) {
      b.emit(qin, isa::dma_copy(partition_slice(em.flat(load, load_len), r.first, r.hbm.partitions),
                                r.hbm));
    }
    b.wait(kVector, b.mark(qin));
    b.wait(kVector, free_all);
    stages(b, em, f, first, second);
    b.wait(qout, b.mark(kVector));
    for (const PlaneRun& r : plane_runs(to, q0, p)) {
      b.emit(qout, isa::dma_copy(r.hbm, partition_slice(em.flat(store, store_len), r.first,
                                                        r.hbm.partitions)));
    }
    free_all = b.mark(qout);
  }
  return std::move(b).build();
}

using Segments = std::array<std::vector<Segment>, 3>;

Program build_upsample(const std::string& name, const TensorDesc& input, const TensorDesc& out,
                       const UpsampleSpec& s, const CoreParams& core) {
  check_spec(name, s, core);
  check(name, input, s, false, "input");
  check(name, out, s, true, "output");
  auto stages = [&](ProgramBuilder& b, Emitter& em, const Buffers& f, const Segments& first,
                    const Segments& second) {
    // Innermost dim first; the last stage writes y.
    uint64_t src = f.x;
    int stage = 0;
    for (int64_t d = s.dims - 1; d >= 0; --d, ++stage) {
      const std::array<int64_t, 3> e0 = extents_before(s, d);
      const int64_t A = product(e0, 0, d), B = product(s.out, d + 1, s.dims);
      const uint64_t dst = d == 0 ? f.y : f.t[stage % 2];
      const View from{src, A, s.in[d], B}, to{dst, A, s.out[d], B};
      em.gather(to, from, first[d]);
      if (s.linear) {
        const View other{f.u, A, s.out[d], B};
        em.gather(other, from, second[d]);
        const AccessPattern tv = em.flat(dst, A * s.out[d] * B),
                            uv = em.flat(f.u, A * s.out[d] * B);
        b.emit(kVector,
               isa::tensor_tensor(tv, tv, em.lambda_spread(to, d, false), AluOp::kMultiply));
        b.emit(kVector,
               isa::tensor_tensor(uv, uv, em.lambda_spread(to, d, true), AluOp::kMultiply));
        b.emit(kVector, isa::tensor_tensor(tv, tv, uv, AluOp::kAdd));
      }
      src = dst;
    }
  };
  return build_planes(name, s, core, input, out, false, stages);
}

Program build_upsample_backward(const std::string& name, const TensorDesc& grad_out,
                                const TensorDesc& grad_input, const UpsampleSpec& s,
                                const CoreParams& core) {
  check_spec(name, s, core);
  check(name, grad_out, s, true, "grad_output");
  check(name, grad_input, s, false, "grad_input");
  auto stages = [&](ProgramBuilder& b, Emitter& em, const Buffers& f, const Segments& first,
                    const Segments& second) {
    // Outermost dim first; the last stage writes x (the input gradient).
    uint64_t src = f.y;
    int stage = 0;
    for (int64_t d = 0; d < s.dims; ++d, ++stage) {
      const std::array<int64_t, 3> e0 = extents_before(s, d);
      const int64_t A = product(e0, 0, d), B = product(s.out, d + 1, s.dims);
      const uint64_t dst = d == s.dims - 1 ? f.x : f.t[stage % 2];
      const View from{src, A, s.out[d], B}, to{dst, A, s.in[d], B};
      // Scratch: u holds the weighted gradient (bilinear) or a segment's sums (nearest); the
      // bilinear sums go to the intermediate buffer this stage neither reads nor writes.
      const uint64_t tmp = !s.linear ? f.u : (src != f.t[1] && dst != f.t[1] ? f.t[1] : f.t[0]);
      b.emit(kVector, isa::memset(em.flat(dst, A * s.in[d] * B), 0.0f));
      if (!s.linear) {
        em.scatter_add(to, from, first[d], tmp);
      } else {
        const View weighted{f.u, A, s.out[d], B};
        const AccessPattern fv = em.flat(src, A * s.out[d] * B),
                            wv = em.flat(f.u, A * s.out[d] * B);
        for (int k = 0; k < 2; ++k) {
          b.emit(kVector,
                 isa::tensor_tensor(wv, fv, em.lambda_spread(from, d, k == 1), AluOp::kMultiply));
          em.scatter_add(to, weighted, k == 0 ? first[d] : second[d], tmp);
        }
      }
      src = dst;
    }
  };
  return build_planes(name, s, core, grad_out, grad_input, true, stages);
}

}  // namespace neuronsim::kernels
