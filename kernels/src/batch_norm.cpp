#include "neuronsim/kernels/batch_norm.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "conv_band.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/program_builder.h"
#include "neuronsim/kernels/rows.h"

namespace neuronsim::kernels {

using namespace device_model;
using Token = ProgramBuilder::Token;

namespace {

// [N, C, *spatial] with the spatial dims padded to three at the end (size 1).
TensorDesc to_5d_trailing(const std::string& name, const TensorDesc& t) {
  if (t.dim() < 2 || t.dim() > 5) {
    throw std::invalid_argument(fmt::format("{}: input {} needs 2 to 5 dims", name, t.to_string()));
  }
  TensorDesc d = t;
  while (d.dim() < 5) {
    d.sizes.push_back(1);
    d.strides.push_back(0);
  }
  return d;
}

// One chunk of a channel block's elements: image n, a box of spatial positions, and where it
// sits in the SBUF buffer (elements).
struct Chunk {
  int64_t n = 0;
  conv::Rect box;
  uint64_t at = 0;
};

// How a channel block's N x spatial elements stream through SBUF: `resident` when `buffers`
// full copies (plus one chunk) fit, so the data is loaded once.
struct Plan {
  std::vector<Chunk> chunks;
  bool resident = false;
  uint32_t buffer = 0;   // elements per partition of each data buffer
  uint32_t largest = 1;  // elements of the largest chunk (scratch buffers)
  int64_t per_channel = 0;
};

Plan plan_chunks(const TensorDesc& x5, const CoreParams& core, uint32_t buffers) {
  Plan p;
  const int64_t N = x5.sizes[0], S = x5.sizes[2] * x5.sizes[3] * x5.sizes[4];
  p.per_channel = N * S;
  if (p.per_channel == 0) return p;
  p.resident = row_chunk(core, buffers + 1, p.per_channel) >= p.per_channel;
  const int64_t limit = std::min<int64_t>(row_chunk(core, buffers + 1, p.per_channel), S);
  conv::Axes a;
  for (int x = 0; x < 3; ++x) a[x].out = x5.sizes[2 + x];
  conv::Band band;
  band.axis = conv::band_axis(a);
  band.hi = a[band.axis].out;
  const std::vector<conv::Rect> boxes = conv::make_blocks(a, band, limit);
  int64_t largest = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (const conv::Rect& r : boxes) {
      p.chunks.push_back({n, r, p.resident ? static_cast<uint64_t>(n * S + r.offset) : 0});
      largest = std::max(largest, r.size());
    }
  }
  p.buffer = static_cast<uint32_t>(p.resident ? p.per_channel : largest);
  p.largest = static_cast<uint32_t>(std::max<int64_t>(largest, 1));
  return p;
}

// Channels [c0, c0 + cw) of a [C] vector, one per partition.
AccessPattern channel_ap(const TensorDesc& t, int64_t c0, uint32_t cw) {
  const int64_t st = t.strides.empty() ? 1 : t.strides[0];
  return hbm_ap(t, c0 * st, cw, st, {});
}

// A chunk of channels [c0, c0 + cw) of a 5-d feature map.
AccessPattern chunk_ap(const TensorDesc& t5, int64_t c0, uint32_t cw, const Chunk& k) {
  return conv::feature_ap(t5, k.n, c0, cw, k.box.start, k.box.count);
}

// Per-channel fp32 columns [cw, 1] in one SBUF area.
struct Columns {
  uint64_t base = 0;
  uint32_t cw = 0;
  AccessPattern operator[](int i) const {
    return isa::sbuf_tile(DType::kFp32, cw, base + static_cast<uint64_t>(i) * 4, 1);
  }
};

// The training statistics of one channel block, in two passes over its chunks: pass 1 the mean
// (`neg_mean` = -sum / M), pass 2 the sum of squares around it (`ssq`, squares on ScalarE with
// their row sums accumulated in `part`); then `rstd` = rsqrt(ssq / M + eps) on ScalarE.
// `load(k, pass)` brings chunk k into `x_of(k)` (resident data: the token of its one load);
// The squares go to scratch at `squares_off`. `free_all` is the token every buffer reuse waits
// for; it is advanced here.
struct Statistics {
  AccessPattern sum, part, neg_mean, ssq, rstd;
};

template <class Load, class XOf>
void emit_statistics(ProgramBuilder& b, const Plan& plan, const Statistics& st, uint32_t cw,
                     uint64_t squares_off, float inv_m, float eps, Load load, XOf x_of,
                     Token& free_all) {
  b.wait(kVector, free_all);
  b.emit(kVector, isa::memset(st.sum, 0.0f));
  b.emit(kVector, isa::memset(st.ssq, 0.0f));
  for (const Chunk& k : plan.chunks) {
    b.wait(kVector, load(k, 0));
    b.emit(kVector, isa::tensor_reduce(st.part, x_of(k), ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(st.sum, st.sum, st.part, AluOp::kAdd));
    free_all = b.mark(kVector);
  }
  b.emit(kVector, isa::tensor_scalar(st.neg_mean, st.sum, AluOp::kMultiply, isa::imm(-inv_m)));
  free_all = b.mark(kVector);
  for (const Chunk& k : plan.chunks) {
    b.wait(kScalar, load(k, 1));
    b.wait(kScalar, free_all);
    const AccessPattern squares =
        isa::sbuf_tile(DType::kFp32, cw, squares_off, static_cast<uint32_t>(k.box.size()));
    Instruction sq = isa::activation(squares, x_of(k), ActFunc::kSquare, isa::imm(1.0f),
                                     isa::per_partition(st.neg_mean));
    sq.has_acc_dst = true;
    sq.acc_dst = st.part;
    b.emit(kScalar, sq);
    b.wait(kVector, b.mark(kScalar));
    b.emit(kVector, isa::tensor_tensor(st.ssq, st.ssq, st.part, AluOp::kAdd));
    free_all = b.mark(kVector);
  }
  b.wait(kScalar, free_all);
  b.emit(kScalar,
         isa::activation(st.rstd, st.ssq, ActFunc::kRsqrt, isa::imm(inv_m), isa::imm(eps)));
}

// `out` = rstd * weight (a copy of rstd without a weight): forward's scale, backward's c1.
void emit_times_weight(ProgramBuilder& b, const AccessPattern& out, const AccessPattern& rstd,
                       const AccessPattern* weight) {
  if (weight)
    b.emit(kVector, isa::tensor_tensor(out, rstd, *weight, AluOp::kMultiply));
  else
    b.emit(kVector, isa::tensor_copy(out, rstd));
}

// y = x * scale + shift: scale = weight * rstd, shift = bias - mean * scale.
void emit_scale_shift(ProgramBuilder& b, const AccessPattern& scale, const AccessPattern& shift,
                      const AccessPattern& rstd, const AccessPattern& neg_mean,
                      const AccessPattern* weight, const AccessPattern* bias) {
  emit_times_weight(b, scale, rstd, weight);
  b.emit(kVector, isa::tensor_tensor(shift, neg_mean, scale, AluOp::kMultiply));
  if (bias) b.emit(kVector, isa::tensor_tensor(shift, shift, *bias, AluOp::kAdd));
}

// One chunk's share of the backward's sums: sum_g += sum(g), dot += sum((x - mean) * g), with
// (x - mean) * g formed in `s` (x itself when x is not needed again).
void emit_grad_sums(ProgramBuilder& b, const AccessPattern& s, const AccessPattern& x,
                    const AccessPattern& g, const AccessPattern& neg_mean,
                    const AccessPattern& part, const AccessPattern& sum_g,
                    const AccessPattern& dot) {
  b.emit(kVector, isa::tensor_reduce(part, g, ReduceOp::kAdd));
  b.emit(kVector, isa::tensor_tensor(sum_g, sum_g, part, AluOp::kAdd));
  b.emit(kVector, isa::tensor_scalar(s, x, AluOp::kAdd, isa::per_partition(neg_mean)));
  b.emit(kVector, isa::tensor_tensor(s, s, g, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_reduce(part, s, ReduceOp::kAdd));
  b.emit(kVector, isa::tensor_tensor(dot, dot, part, AluOp::kAdd));
}

// grad_in = g * c1 + x * a + bias over N elements per channel: c1 = invstd * weight,
// a = -c1 * invstd^2 * dot / N, bias = -a * mean - c1 * sum_g / N (`part` is scratch).
struct GradInCoefficients {
  AccessPattern c1, a, bias;
};
void emit_grad_in_coefficients(ProgramBuilder& b, const GradInCoefficients& k,
                               const AccessPattern& invstd, const AccessPattern* weight,
                               const AccessPattern& neg_mean, const AccessPattern& sum_g,
                               const AccessPattern& dot, const AccessPattern& part, float inv_n) {
  emit_times_weight(b, k.c1, invstd, weight);
  b.emit(kVector, isa::tensor_tensor(k.a, invstd, invstd, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_tensor(k.a, k.a, dot, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_tensor(k.a, k.a, k.c1, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_scalar(k.a, k.a, AluOp::kMultiply, isa::imm(-inv_n)));
  b.emit(kVector, isa::tensor_tensor(k.bias, k.a, neg_mean, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_tensor(part, sum_g, k.c1, AluOp::kMultiply));
  b.emit(kVector, isa::tensor_scalar(part, part, AluOp::kMultiply, isa::imm(inv_n)));
  b.emit(kVector, isa::tensor_tensor(k.bias, k.bias, part, AluOp::kSubtract));
}

// One chunk of grad_in into `x` (in place; g is scaled in place too).
void emit_grad_in(ProgramBuilder& b, const AccessPattern& x, const AccessPattern& g,
                  const GradInCoefficients& k) {
  b.emit(kVector, isa::tensor_scalar(x, x, AluOp::kMultiply, isa::per_partition(k.a), AluOp::kAdd,
                                     isa::per_partition(k.bias)));
  b.emit(kVector, isa::tensor_scalar(g, g, AluOp::kMultiply, isa::per_partition(k.c1)));
  b.emit(kVector, isa::tensor_tensor(x, x, g, AluOp::kAdd));
}

}  // namespace

Program build_batch_norm(const std::string& name, const BatchNormIo& io, const CoreParams& core) {
  const TensorDesc x5 = to_5d_trailing(name, io.in), y5 = to_5d_trailing(name, io.out);
  if (x5.sizes != y5.sizes) {
    throw std::invalid_argument(fmt::format("{}: output {} does not match input {}", name,
                                            io.out.to_string(), io.in.to_string()));
  }
  if (!io.training && !(io.running_mean && io.running_var)) {
    throw std::invalid_argument(name + ": eval mode needs running_mean and running_var");
  }
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 1);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t x_off = b.alloc_sbuf(uint64_t{std::max<uint32_t>(plan.buffer, 1)} * 4),
                 y_off = b.alloc_sbuf(uint64_t{plan.largest} * 4), s_off = b.alloc_sbuf(16 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t C = x5.sizes[1], M = plan.per_channel;
  const float inv_m = M > 0 ? 1.0f / static_cast<float>(M) : 0.0f;
  const float m = io.momentum;
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern sum = col[0], part = col[1], neg_mean = col[2], ssq = col[3], rstd = col[4],
                        scale = col[5], shift = col[6], w = col[7], bb = col[8], rm = col[9],
                        rv = col[10], t1 = col[11];
    // Parameters and running statistics.
    b.wait(qparam, free_all);
    if (io.weight) b.emit(qparam, isa::dma_copy(w, channel_ap(*io.weight, c0, cw)));
    if (io.bias) b.emit(qparam, isa::dma_copy(bb, channel_ap(*io.bias, c0, cw)));
    if (io.running_mean) b.emit(qparam, isa::dma_copy(rm, channel_ap(*io.running_mean, c0, cw)));
    if (io.running_var) b.emit(qparam, isa::dma_copy(rv, channel_ap(*io.running_var, c0, cw)));
    const Token params = b.mark(qparam);
    auto x_of = [&](const Chunk& k) {
      return isa::sbuf_tile(DType::kFp32, cw, x_off + k.at * 4,
                            static_cast<uint32_t>(k.box.size()));
    };
    auto load = [&](const Chunk& k, int pass) {
      // Resident data is loaded by the first pass only (eval has only the last).
      if (plan.resident && pass > (io.training ? 0 : 2)) return b.mark(qin);
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(x_of(k), chunk_ap(x5, c0, cw, k)));
      return b.mark(qin);
    };
    if (io.training) {
      emit_statistics(b, plan, {sum, part, neg_mean, ssq, rstd}, cw, y_off, inv_m, io.eps, load,
                      x_of, free_all);
      b.wait(kVector, b.mark(kScalar));
    } else {
      b.wait(kScalar, params);
      b.wait(kScalar, free_all);
      b.emit(kScalar, isa::activation(rstd, rv, ActFunc::kRsqrt, isa::imm(1.0f), isa::imm(io.eps)));
      b.wait(kVector, b.mark(kScalar));
      b.emit(kVector, isa::tensor_scalar(neg_mean, rm, AluOp::kMultiply, isa::imm(-1.0f)));
    }
    b.wait(kVector, params);
    emit_scale_shift(b, scale, shift, rstd, neg_mean, io.weight ? &w : nullptr,
                     io.bias ? &bb : nullptr);
    free_all = b.mark(kVector);
    for (const Chunk& k : plan.chunks) {
      const AccessPattern x = x_of(k);
      const AccessPattern y = plan.resident ? x
                                            : isa::sbuf_tile(DType::kFp32, cw, y_off,
                                                             static_cast<uint32_t>(k.box.size()));
      b.wait(kVector, load(k, 2));
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_scalar(y, x, AluOp::kMultiply, isa::per_partition(scale),
                                         AluOp::kAdd, isa::per_partition(shift)));
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(chunk_ap(y5, c0, cw, k), y));
      free_all = b.mark(qout);
    }
    if (io.training) {
      // Saved statistics, and the running ones: r = (1 - m) r + m * stat (unbiased variance).
      b.wait(kVector, free_all);
      b.emit(kVector, isa::tensor_scalar(t1, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
      if (io.running_mean) {
        b.emit(kVector, isa::tensor_scalar(rm, rm, AluOp::kMultiply, isa::imm(1.0f - m)));
        b.emit(kVector, isa::tensor_scalar(part, neg_mean, AluOp::kMultiply, isa::imm(-m)));
        b.emit(kVector, isa::tensor_tensor(rm, rm, part, AluOp::kAdd));
      }
      if (io.running_var) {
        const float unbias = M > 1 ? m / static_cast<float>(M - 1) : m / 0.0f;
        b.emit(kVector, isa::tensor_scalar(rv, rv, AluOp::kMultiply, isa::imm(1.0f - m)));
        b.emit(kVector, isa::tensor_scalar(part, ssq, AluOp::kMultiply, isa::imm(unbias)));
        b.emit(kVector, isa::tensor_tensor(rv, rv, part, AluOp::kAdd));
      }
      b.wait(qout, b.mark(kVector));
      if (io.save_mean) b.emit(qout, isa::dma_copy(channel_ap(*io.save_mean, c0, cw), t1));
      if (io.save_invstd) b.emit(qout, isa::dma_copy(channel_ap(*io.save_invstd, c0, cw), rstd));
      if (io.running_mean) b.emit(qout, isa::dma_copy(channel_ap(*io.running_mean, c0, cw), rm));
      if (io.running_var) b.emit(qout, isa::dma_copy(channel_ap(*io.running_var, c0, cw), rv));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

Program build_batch_norm_backward(const std::string& name, const BatchNormBackwardIo& io,
                                  const CoreParams& core) {
  const TensorDesc x5 = to_5d_trailing(name, io.in), g5 = to_5d_trailing(name, io.grad_out);
  std::optional<TensorDesc> gi5;
  if (io.grad_in) gi5 = to_5d_trailing(name, *io.grad_in);
  const auto& mean_src = io.training ? io.save_mean : io.running_mean;
  const auto& stat_src = io.training ? io.save_invstd : io.running_var;
  if (x5.sizes != g5.sizes || (gi5 && gi5->sizes != x5.sizes) || !mean_src || !stat_src) {
    throw std::invalid_argument(
        fmt::format("{}: grad_out {} and input {} must match, with {} statistics", name,
                    io.grad_out.to_string(), io.in.to_string(), io.training ? "saved" : "running"));
  }
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 2);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t len = uint64_t{std::max<uint32_t>(plan.buffer, 1)} * 4;
  const uint64_t x_off = b.alloc_sbuf(len), g_off = b.alloc_sbuf(len),
                 t_off = b.alloc_sbuf(uint64_t{plan.resident ? plan.largest : 1u} * 4),
                 s_off = b.alloc_sbuf(16 * 4);
  const StreamId qin = dma_queue(0), qg = dma_queue(3), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t C = x5.sizes[1], M = plan.per_channel;
  const float inv_m = M > 0 ? 1.0f / static_cast<float>(M) : 0.0f;
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern mean = col[0], invstd = col[1], neg_mean = col[2], w = col[3],
                        sum_g = col[4], dot = col[5], part = col[6], c1 = col[7], a = col[8],
                        bias = col[9];
    b.wait(qparam, free_all);
    b.emit(qparam, isa::dma_copy(mean, channel_ap(*mean_src, c0, cw)));
    b.emit(qparam, isa::dma_copy(invstd, channel_ap(*stat_src, c0, cw)));
    if (io.weight) b.emit(qparam, isa::dma_copy(w, channel_ap(*io.weight, c0, cw)));
    const Token params = b.mark(qparam);
    b.wait(kScalar, params);
    if (!io.training) {  // invstd = 1 / sqrt(running_var + eps)
      b.emit(kScalar,
             isa::activation(invstd, invstd, ActFunc::kRsqrt, isa::imm(1.0f), isa::imm(io.eps)));
    }
    b.wait(kVector, b.mark(kScalar));
    b.wait(kVector, free_all);
    b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
    b.emit(kVector, isa::memset(sum_g, 0.0f));
    b.emit(kVector, isa::memset(dot, 0.0f));
    free_all = b.mark(kVector);
    auto tile = [&](uint64_t off, const Chunk& k) {
      return isa::sbuf_tile(DType::kFp32, cw, off + k.at * 4, static_cast<uint32_t>(k.box.size()));
    };
    auto load = [&](const Chunk& k, int pass) {
      if (!(plan.resident && pass > 0)) {
        b.wait(qin, free_all);
        b.wait(qg, free_all);
        b.emit(qin, isa::dma_copy(tile(x_off, k), chunk_ap(x5, c0, cw, k)));
        b.emit(qg, isa::dma_copy(tile(g_off, k), chunk_ap(g5, c0, cw, k)));
      }
      b.wait(kVector, b.mark(qin));
      b.wait(kVector, b.mark(qg));
    };
    // Pass 1: sum(g) and sum(g * (x - mean)) per channel.
    for (const Chunk& k : plan.chunks) {
      load(k, 0);
      b.wait(kVector, free_all);
      const AccessPattern x = tile(x_off, k), g = tile(g_off, k);
      // (x - mean) * g into scratch (x itself when streaming: it is reloaded).
      const AccessPattern s = plan.resident ? isa::sbuf_tile(DType::kFp32, cw, t_off,
                                                             static_cast<uint32_t>(k.box.size()))
                                            : x;
      emit_grad_sums(b, s, x, g, neg_mean, part, sum_g, dot);
      free_all = b.mark(kVector);
    }
    // grad_in = g * c1 + x * a + bias (emit_grad_in_coefficients); eval: a = bias = 0.
    const GradInCoefficients coef{c1, a, bias};
    if (io.training)
      emit_grad_in_coefficients(b, coef, invstd, io.weight ? &w : nullptr, neg_mean, sum_g, dot,
                                part, inv_m);
    else
      emit_times_weight(b, c1, invstd, io.weight ? &w : nullptr);
    free_all = b.mark(kVector);
    if (io.grad_in) {
      for (const Chunk& k : plan.chunks) {
        load(k, 1);
        b.wait(kVector, free_all);
        const AccessPattern x = tile(x_off, k), g = tile(g_off, k), s = x;  // x in place
        if (io.training)
          emit_grad_in(b, s, g, coef);
        else
          b.emit(kVector, isa::tensor_scalar(s, g, AluOp::kMultiply, isa::per_partition(c1)));
        b.wait(qout, b.mark(kVector));
        b.emit(qout, isa::dma_copy(chunk_ap(*gi5, c0, cw, k), s));
        free_all = b.mark(qout);
      }
    }
    // grad_weight = dot * invstd, grad_bias = sum(g).
    b.wait(kVector, free_all);
    b.emit(kVector, isa::tensor_tensor(dot, dot, invstd, AluOp::kMultiply));
    b.wait(qout, b.mark(kVector));
    if (io.grad_weight) b.emit(qout, isa::dma_copy(channel_ap(*io.grad_weight, c0, cw), dot));
    if (io.grad_bias) b.emit(qout, isa::dma_copy(channel_ap(*io.grad_bias, c0, cw), sum_g));
    free_all = b.mark(qout);
  }
  return std::move(b).build();
}

// ---- nn.SyncBatchNorm's ops: the phases above, apart ----

Program build_batch_norm_stats(const std::string& name, const BatchNormStatsIo& io,
                               const CoreParams& core) {
  const TensorDesc x5 = to_5d_trailing(name, io.in);
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 1);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t x_off = b.alloc_sbuf(uint64_t{std::max<uint32_t>(plan.buffer, 1)} * 4),
                 y_off = b.alloc_sbuf(uint64_t{plan.largest} * 4), s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1);
  const int64_t C = x5.sizes[1], M = plan.per_channel;
  const float inv_m = M > 0 ? 1.0f / static_cast<float>(M) : 0.0f;
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern sum = col[0], part = col[1], neg_mean = col[2], ssq = col[3], rstd = col[4],
                        mean = col[5];
    auto x_of = [&](const Chunk& k) {
      return isa::sbuf_tile(DType::kFp32, cw, x_off + k.at * 4,
                            static_cast<uint32_t>(k.box.size()));
    };
    auto load = [&](const Chunk& k, int pass) {
      if (plan.resident && pass > 0) return b.mark(qin);  // resident: loaded by pass 1
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(x_of(k), chunk_ap(x5, c0, cw, k)));
      return b.mark(qin);
    };
    emit_statistics(b, plan, {sum, part, neg_mean, ssq, rstd}, cw, y_off, inv_m, io.eps, load, x_of,
                    free_all);
    b.emit(kVector, isa::tensor_scalar(mean, neg_mean, AluOp::kMultiply, isa::imm(-1.0f)));
    b.wait(qout, b.mark(kScalar));
    b.wait(qout, b.mark(kVector));
    b.emit(qout, isa::dma_copy(channel_ap(io.mean, c0, cw), mean));
    b.emit(qout, isa::dma_copy(channel_ap(io.invstd, c0, cw), rstd));
    free_all = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_batch_norm_gather_stats(const std::string& name, const BatchNormGatherStatsIo& io,
                                      const CoreParams& core) {
  if (io.mean_all.dim() != 2 || io.invstd_all.sizes != io.mean_all.sizes ||
      io.counts.numel() != static_cast<uint64_t>(io.mean_all.sizes[0])) {
    throw std::invalid_argument(
        fmt::format("{}: mean {} and invstd {} must be [W, C] with W counts, got counts {}", name,
                    io.mean_all.to_string(), io.invstd_all.to_string(), io.counts.to_string()));
  }
  ProgramBuilder b(name, core);
  const uint32_t P = core.sbuf.partitions;
  const int64_t W = io.mean_all.sizes[0], C = io.mean_all.sizes[1];
  const uint32_t w = static_cast<uint32_t>(std::max<int64_t>(W, 1));
  const uint64_t m_off = b.alloc_sbuf(uint64_t{w} * 4), i_off = b.alloc_sbuf(uint64_t{w} * 4),
                 n_off = b.alloc_sbuf(uint64_t{w} * 4), q_off = b.alloc_sbuf(uint64_t{w} * 4),
                 s_off = b.alloc_sbuf(12 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t cnt_stride = io.counts.strides.empty() ? 1 : io.counts.strides[0];
  const float m = io.momentum;
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern n = col[0], sum_cm = col[1], sum_cq = col[2], avg = col[3], var_n = col[4],
                        part = col[5], rstd = col[6], rm = col[7], rv = col[8], var = col[9];
    const AccessPattern mt = isa::sbuf_tile(DType::kFp32, cw, m_off, w),
                        it = isa::sbuf_tile(DType::kFp32, cw, i_off, w),
                        nt = isa::sbuf_tile(DType::kFp32, cw, n_off, w),
                        qt = isa::sbuf_tile(DType::kFp32, cw, q_off, w);
    // Channel c's W values on partition c; every partition reads all W counts.
    b.wait(qin, free_all);
    b.emit(qin, isa::dma_copy(mt, hbm_ap(io.mean_all, c0 * io.mean_all.strides[1], cw,
                                         io.mean_all.strides[1], {{io.mean_all.strides[0], w}})));
    b.emit(qin,
           isa::dma_copy(it, hbm_ap(io.invstd_all, c0 * io.invstd_all.strides[1], cw,
                                    io.invstd_all.strides[1], {{io.invstd_all.strides[0], w}})));
    b.emit(qin, isa::dma_copy(nt, hbm_ap(io.counts, 0, cw, 0, {{cnt_stride, w}})));
    b.wait(qparam, free_all);
    if (io.running_mean) b.emit(qparam, isa::dma_copy(rm, channel_ap(*io.running_mean, c0, cw)));
    if (io.running_var) b.emit(qparam, isa::dma_copy(rv, channel_ap(*io.running_var, c0, cw)));
    b.wait(kVector, b.mark(qin));
    // Rank j's biased variance v_j = 1 / invstd_j^2 - eps; over all ranks
    // n = sum c_j, avg = sum c_j m_j / n, var_n = sum c_j (v_j + m_j^2) - n avg^2.
    b.emit(kVector, isa::tensor_tensor(it, it, it, AluOp::kMultiply));
    b.wait(kScalar, b.mark(kVector));
    b.emit(kScalar, isa::activation(it, it, ActFunc::kReciprocal));
    b.wait(kVector, b.mark(kScalar));
    b.emit(kVector, isa::tensor_scalar(it, it, AluOp::kSubtract, isa::imm(io.eps)));
    b.emit(kVector, isa::tensor_reduce(n, nt, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(qt, nt, mt, AluOp::kMultiply));  // c_j m_j
    b.emit(kVector, isa::tensor_reduce(sum_cm, qt, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(qt, qt, mt, AluOp::kMultiply));  // c_j m_j^2
    b.emit(kVector, isa::tensor_reduce(sum_cq, qt, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(it, it, nt, AluOp::kMultiply));  // c_j v_j
    b.emit(kVector, isa::tensor_reduce(part, it, ReduceOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(sum_cq, sum_cq, part, AluOp::kAdd));
    b.emit(kVector, isa::tensor_tensor(avg, sum_cm, n, AluOp::kDivide));
    b.emit(kVector, isa::tensor_tensor(part, avg, sum_cm, AluOp::kMultiply));  // n avg^2
    b.emit(kVector, isa::tensor_tensor(var_n, sum_cq, part, AluOp::kSubtract));
    // The biased variance in a column of its own: ScalarE reads it while VectorE goes on.
    b.emit(kVector, isa::tensor_tensor(var, var_n, n, AluOp::kDivide));
    b.wait(kScalar, b.mark(kVector));
    b.emit(kScalar, isa::activation(rstd, var, ActFunc::kRsqrt, isa::imm(1.0f), isa::imm(io.eps)));
    // Running statistics: r = (1 - m) r + m * stat, the variance unbiased (var_n / (n - 1)).
    b.wait(kVector, b.mark(qparam));
    if (io.running_mean) {
      b.emit(kVector, isa::tensor_scalar(rm, rm, AluOp::kMultiply, isa::imm(1.0f - m)));
      b.emit(kVector, isa::tensor_scalar(part, avg, AluOp::kMultiply, isa::imm(m)));
      b.emit(kVector, isa::tensor_tensor(rm, rm, part, AluOp::kAdd));
    }
    if (io.running_var) {
      b.emit(kVector, isa::tensor_scalar(part, n, AluOp::kSubtract, isa::imm(1.0f)));
      b.emit(kVector, isa::tensor_tensor(part, var_n, part, AluOp::kDivide));
      b.emit(kVector, isa::tensor_scalar(part, part, AluOp::kMultiply, isa::imm(m)));
      b.emit(kVector, isa::tensor_scalar(rv, rv, AluOp::kMultiply, isa::imm(1.0f - m)));
      b.emit(kVector, isa::tensor_tensor(rv, rv, part, AluOp::kAdd));
    }
    b.wait(qout, b.mark(kVector));
    b.wait(qout, b.mark(kScalar));
    b.emit(qout, isa::dma_copy(channel_ap(io.mean, c0, cw), avg));
    b.emit(qout, isa::dma_copy(channel_ap(io.invstd, c0, cw), rstd));
    if (io.running_mean) b.emit(qout, isa::dma_copy(channel_ap(*io.running_mean, c0, cw), rm));
    if (io.running_var) b.emit(qout, isa::dma_copy(channel_ap(*io.running_var, c0, cw), rv));
    free_all = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_batch_norm_elemt(const std::string& name, const BatchNormElemtIo& io,
                               const CoreParams& core) {
  const TensorDesc x5 = to_5d_trailing(name, io.in), y5 = to_5d_trailing(name, io.out);
  if (x5.sizes != y5.sizes) {
    throw std::invalid_argument(fmt::format("{}: output {} does not match input {}", name,
                                            io.out.to_string(), io.in.to_string()));
  }
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 1);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t x_off = b.alloc_sbuf(uint64_t{std::max<uint32_t>(plan.buffer, 1)} * 4),
                 y_off = b.alloc_sbuf(uint64_t{plan.largest} * 4), s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t C = x5.sizes[1];
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern mean = col[0], rstd = col[1], w = col[2], bb = col[3], scale = col[4],
                        shift = col[5], neg_mean = col[6];
    b.wait(qparam, free_all);
    b.emit(qparam, isa::dma_copy(mean, channel_ap(io.mean, c0, cw)));
    b.emit(qparam, isa::dma_copy(rstd, channel_ap(io.invstd, c0, cw)));
    if (io.weight) b.emit(qparam, isa::dma_copy(w, channel_ap(*io.weight, c0, cw)));
    if (io.bias) b.emit(qparam, isa::dma_copy(bb, channel_ap(*io.bias, c0, cw)));
    b.wait(kVector, b.mark(qparam));
    b.wait(kVector, free_all);
    b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
    emit_scale_shift(b, scale, shift, rstd, neg_mean, io.weight ? &w : nullptr,
                     io.bias ? &bb : nullptr);
    free_all = b.mark(kVector);
    for (const Chunk& k : plan.chunks) {
      const AccessPattern x =
          isa::sbuf_tile(DType::kFp32, cw, x_off + k.at * 4, static_cast<uint32_t>(k.box.size()));
      const AccessPattern y = plan.resident ? x
                                            : isa::sbuf_tile(DType::kFp32, cw, y_off,
                                                             static_cast<uint32_t>(k.box.size()));
      b.wait(qin, free_all);
      b.emit(qin, isa::dma_copy(x, chunk_ap(x5, c0, cw, k)));
      b.wait(kVector, b.mark(qin));
      b.emit(kVector, isa::tensor_scalar(y, x, AluOp::kMultiply, isa::per_partition(scale),
                                         AluOp::kAdd, isa::per_partition(shift)));
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(chunk_ap(y5, c0, cw, k), y));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

namespace {

// The backward's operands: grad_out and input of equal sizes, as 5-d.
std::pair<TensorDesc, TensorDesc> backward_operands(const std::string& name,
                                                    const TensorDesc& grad_out,
                                                    const TensorDesc& in) {
  TensorDesc g5 = to_5d_trailing(name, grad_out), x5 = to_5d_trailing(name, in);
  if (g5.sizes != x5.sizes) {
    throw std::invalid_argument(fmt::format("{}: grad_out {} and input {} must match", name,
                                            grad_out.to_string(), in.to_string()));
  }
  return {g5, x5};
}

}  // namespace

Program build_batch_norm_backward_reduce(const std::string& name,
                                         const BatchNormBackwardReduceIo& io,
                                         const CoreParams& core) {
  const auto [g5, x5] = backward_operands(name, io.grad_out, io.in);
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 2);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t len = uint64_t{plan.largest} * 4;  // one pass: chunks stream through
  const uint64_t x_off = b.alloc_sbuf(len), g_off = b.alloc_sbuf(len), s_off = b.alloc_sbuf(8 * 4);
  const StreamId qin = dma_queue(0), qg = dma_queue(3), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t C = x5.sizes[1];
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern mean = col[0], invstd = col[1], neg_mean = col[2], sum_g = col[3],
                        dot = col[4], part = col[5], gw = col[6];
    b.wait(qparam, free_all);
    b.emit(qparam, isa::dma_copy(mean, channel_ap(io.mean, c0, cw)));
    b.emit(qparam, isa::dma_copy(invstd, channel_ap(io.invstd, c0, cw)));
    b.wait(kVector, b.mark(qparam));
    b.wait(kVector, free_all);
    b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
    b.emit(kVector, isa::memset(sum_g, 0.0f));
    b.emit(kVector, isa::memset(dot, 0.0f));
    free_all = b.mark(kVector);
    for (const Chunk& k : plan.chunks) {
      const uint32_t len_k = static_cast<uint32_t>(k.box.size());
      const AccessPattern x = isa::sbuf_tile(DType::kFp32, cw, x_off, len_k),
                          g = isa::sbuf_tile(DType::kFp32, cw, g_off, len_k);
      b.wait(qin, free_all);
      b.wait(qg, free_all);
      b.emit(qin, isa::dma_copy(x, chunk_ap(x5, c0, cw, k)));
      b.emit(qg, isa::dma_copy(g, chunk_ap(g5, c0, cw, k)));
      b.wait(kVector, b.mark(qin));
      b.wait(kVector, b.mark(qg));
      emit_grad_sums(b, x, x, g, neg_mean, part, sum_g, dot);
      free_all = b.mark(kVector);
    }
    if (io.grad_weight) b.emit(kVector, isa::tensor_tensor(gw, dot, invstd, AluOp::kMultiply));
    b.wait(qout, b.mark(kVector));
    if (io.sum_dy) b.emit(qout, isa::dma_copy(channel_ap(*io.sum_dy, c0, cw), sum_g));
    if (io.sum_dy_xmu) b.emit(qout, isa::dma_copy(channel_ap(*io.sum_dy_xmu, c0, cw), dot));
    if (io.grad_weight) b.emit(qout, isa::dma_copy(channel_ap(*io.grad_weight, c0, cw), gw));
    if (io.grad_bias) b.emit(qout, isa::dma_copy(channel_ap(*io.grad_bias, c0, cw), sum_g));
    free_all = b.mark(qout);
  }
  return std::move(b).build();
}

Program build_batch_norm_backward_elemt(const std::string& name, const BatchNormBackwardElemtIo& io,
                                        const CoreParams& core) {
  const auto [g5, x5] = backward_operands(name, io.grad_out, io.in);
  const TensorDesc gi5 = to_5d_trailing(name, io.grad_in);
  if (gi5.sizes != x5.sizes) {
    throw std::invalid_argument(fmt::format("{}: grad_input {} does not match input {}", name,
                                            io.grad_in.to_string(), io.in.to_string()));
  }
  ProgramBuilder b(name, core);
  const Plan plan = plan_chunks(x5, core, 2);
  const uint32_t P = core.sbuf.partitions;
  const uint64_t len = uint64_t{plan.largest} * 4;
  const uint64_t x_off = b.alloc_sbuf(len), g_off = b.alloc_sbuf(len), s_off = b.alloc_sbuf(12 * 4);
  const StreamId qin = dma_queue(0), qg = dma_queue(3), qout = dma_queue(1), qparam = dma_queue(2);
  const int64_t C = x5.sizes[1];
  const float inv_n = io.count > 0 ? 1.0f / io.count : 0.0f;
  Token free_all;
  for (int64_t c0 = 0; c0 < C; c0 += P) {
    const uint32_t cw = static_cast<uint32_t>(std::min<int64_t>(P, C - c0));
    const Columns col{s_off, cw};
    const AccessPattern mean = col[0], invstd = col[1], w = col[2], sum_g = col[3], dot = col[4],
                        c1 = col[5], a = col[6], bias = col[7], part = col[8], neg_mean = col[9];
    b.wait(qparam, free_all);
    b.emit(qparam, isa::dma_copy(mean, channel_ap(io.mean, c0, cw)));
    b.emit(qparam, isa::dma_copy(invstd, channel_ap(io.invstd, c0, cw)));
    if (io.weight) b.emit(qparam, isa::dma_copy(w, channel_ap(*io.weight, c0, cw)));
    b.emit(qparam, isa::dma_copy(sum_g, channel_ap(io.sum_dy, c0, cw)));
    b.emit(qparam, isa::dma_copy(dot, channel_ap(io.sum_dy_xmu, c0, cw)));
    b.wait(kVector, b.mark(qparam));
    b.wait(kVector, free_all);
    b.emit(kVector, isa::tensor_scalar(neg_mean, mean, AluOp::kMultiply, isa::imm(-1.0f)));
    const GradInCoefficients coef{c1, a, bias};
    emit_grad_in_coefficients(b, coef, invstd, io.weight ? &w : nullptr, neg_mean, sum_g, dot, part,
                              inv_n);
    free_all = b.mark(kVector);
    for (const Chunk& k : plan.chunks) {
      const uint32_t len_k = static_cast<uint32_t>(k.box.size());
      const AccessPattern x = isa::sbuf_tile(DType::kFp32, cw, x_off, len_k),
                          g = isa::sbuf_tile(DType::kFp32, cw, g_off, len_k);
      b.wait(qin, free_all);
      b.wait(qg, free_all);
      b.emit(qin, isa::dma_copy(x, chunk_ap(x5, c0, cw, k)));
      b.emit(qg, isa::dma_copy(g, chunk_ap(g5, c0, cw, k)));
      b.wait(kVector, b.mark(qin));
      b.wait(kVector, b.mark(qg));
      emit_grad_in(b, x, g, coef);
      b.wait(qout, b.mark(kVector));
      b.emit(qout, isa::dma_copy(chunk_ap(gi5, c0, cw, k), x));
      free_all = b.mark(qout);
    }
  }
  return std::move(b).build();
}

}  // namespace neuronsim::kernels
