#include "neuronsim/kernels/spmd.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::kernels {

using namespace device_model;

TensorDesc slice_dim(const TensorDesc& t, int64_t dim, int64_t begin, int64_t end) {
  if (dim < 0 || dim >= t.dim() || begin < 0 || end < begin || end > t.sizes[dim]) {
    throw std::invalid_argument(
        fmt::format("slice [{}, {}) of dim {} is outside {}", begin, end, dim, t.to_string()));
  }
  TensorDesc s = t;
  s.sizes[dim] = end - begin;
  s.address =
      static_cast<uint64_t>(static_cast<int64_t>(t.address) +
                            begin * t.strides[dim] * static_cast<int64_t>(dtype_size(t.dtype)));
  return s;
}

std::vector<std::pair<int64_t, int64_t>> split_range(int64_t units, uint32_t parts) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t b = 0;
  for (uint32_t p = 0; p < parts; ++p) {
    const int64_t n = units / parts + (static_cast<int64_t>(p) < units % parts ? 1 : 0);
    out.emplace_back(b, b + n);
    b += n;
  }
  return out;
}

Program join_instances(const std::string& name, std::vector<Program> parts) {
  if (parts.empty()) throw std::invalid_argument("join_instances: no parts");
  if (parts.size() == 1) return std::move(parts[0]);
  if (parts.size() > 255) throw std::invalid_argument("join_instances: more than 255 parts");
  Program out;
  out.name = name;
  out.grid = static_cast<uint32_t>(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    Program& part = parts[p];
    if (part.grid != 1) throw std::invalid_argument("join_instances: a part is a grid launch");
    const uint32_t section_base = static_cast<uint32_t>(out.sections.size());
    for (Stream& s : part.streams) {
      s.id.pcore = static_cast<uint8_t>(p);
      for (auto& m : s.section_marks) m.second += section_base;
      out.streams.push_back(std::move(s));
    }
    for (HbmRegion& r : part.hbm_regions) out.hbm_regions.push_back(std::move(r));
    for (ProgramSection& s : part.sections) out.sections.push_back(std::move(s));
  }
  return out;
}

void core_barrier(Program& p, StreamId at, uint32_t semaphores) {
  if (p.grid < 2) throw std::invalid_argument("core_barrier: the program is not a grid launch");
  int64_t used = -1;
  for (const Stream& s : p.streams) {
    for (const Instruction& in : s.instructions) {
      if (in.is_sync()) used = std::max<int64_t>(used, in.sem);
    }
  }
  const int64_t sem = used + 1;
  if (sem >= semaphores) {
    throw std::invalid_argument(
        fmt::format("core_barrier: program '{}' uses every one of the core's {} semaphores", p.name,
                    semaphores));
  }
  for (uint32_t i = 0; i < p.grid; ++i) {
    Stream& s = p.stream(StreamId{at.engine, at.queue, static_cast<uint8_t>(i)});
    for (uint32_t j = 0; j < p.grid; ++j) {
      if (j == i) continue;
      Instruction sig;
      sig.op = Opcode::kSemSignal;
      sig.sem = static_cast<uint16_t>(sem);
      sig.sem_value = 1;
      sig.sem_pcore = static_cast<int8_t>(j);
      s.instructions.push_back(sig);
    }
    Instruction wait;
    wait.op = Opcode::kSemWait;
    wait.sem = static_cast<uint16_t>(sem);
    wait.sem_value = static_cast<int32_t>(p.grid - 1);
    s.instructions.push_back(wait);
  }
}

namespace {

// The dim of `t` that is outermost in memory (largest stride) among those with at least `min`
// elements (and, given `allowed`, allowed); -1 when there is none.
int64_t outermost_dim(const TensorDesc& t, int64_t min, const std::vector<bool>& allowed = {}) {
  int64_t best = -1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if ((!allowed.empty() && !allowed[static_cast<size_t>(d)]) || t.sizes[d] < min) continue;
    if (best < 0 || std::llabs(t.strides[d]) > std::llabs(t.strides[best])) best = d;
  }
  return best;
}

// `t` as a tensor of `sizes` (right-aligned broadcast, stride 0 on broadcast dims).
TensorDesc broadcast_to(const TensorDesc& t, const std::vector<int64_t>& sizes) {
  TensorDesc b = t;
  b.strides = broadcast_strides(t, sizes);
  b.sizes = sizes;
  return b;
}

// A bias broadcastable to c, sliced where c is sliced along c's dim `cdim` (a dim of size 1 or
// missing broadcasts and stays).
std::optional<TensorDesc> slice_bias(const std::optional<TensorDesc>& bias, const TensorDesc& c,
                                     int64_t cdim, int64_t begin, int64_t end) {
  if (!bias) return bias;
  const int64_t d = cdim - (c.dim() - bias->dim());
  if (d < 0 || bias->sizes[d] == 1) return bias;
  return slice_dim(*bias, d, begin, end);
}

bool enough_work(const TensorDesc& t, uint32_t grid) {
  return grid > 1 && static_cast<int64_t>(t.numel()) >= kMinElementsPerCore * int64_t{grid};
}

// Every dim of a rank-`nd` tensor but `dim` (negative counts from the end): the row dims of a
// softmax over `dim`.
std::vector<bool> every_dim_but(int64_t nd, int64_t dim) {
  std::vector<bool> allowed(static_cast<size_t>(nd), true);
  const int64_t sd = dim < 0 ? dim + nd : dim;
  if (sd >= 0 && sd < nd) allowed[static_cast<size_t>(sd)] = false;
  return allowed;
}

// One program per range of `units` split over `grid` cores, joined into one grid launch.
Program split_join(const std::string& name, int64_t units, uint32_t grid,
                   const std::function<Program(int64_t, int64_t)>& part) {
  std::vector<Program> parts;
  for (const auto& [b0, b1] : split_range(units, grid)) parts.push_back(part(b0, b1));
  return join_instances(name, std::move(parts));
}

}  // namespace

Program build_reduce_grid(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                          const ReduceSpec& spec, const CoreParams& core, uint32_t grid) {
  const int64_t nd = in.dim();
  std::vector<bool> kept(static_cast<size_t>(nd), !spec.dims.empty());
  for (int64_t d : spec.dims) kept.at(static_cast<size_t>(d < 0 ? d + nd : d)) = false;
  const int64_t d = enough_work(in, grid) ? outermost_dim(in, grid, kept) : -1;
  if (d < 0) return build_reduce(name, in, out, spec, core);
  // The output dim of input dim d: the same with keepdim, else d less the reduced dims before it.
  int64_t od = d;
  if (out.dim() != nd) {
    for (int64_t k = 0; k < d; ++k) od -= kept[static_cast<size_t>(k)] ? 0 : 1;
  }
  return split_join(name, in.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    return build_reduce(name, slice_dim(in, d, b0, b1), slice_dim(out, od, b0, b1), spec, core);
  });
}

Program build_softmax_grid(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                           int64_t dim, bool log, const CoreParams& core, uint32_t grid) {
  const int64_t d =
      enough_work(in, grid) ? outermost_dim(in, grid, every_dim_but(in.dim(), dim)) : -1;
  if (d < 0) return build_softmax(name, in, out, dim, log, core);
  return split_join(name, in.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    return build_softmax(name, slice_dim(in, d, b0, b1), slice_dim(out, d, b0, b1), dim, log, core);
  });
}

Program build_softmax_backward_grid(const std::string& name, const TensorDesc& grad_out,
                                    const TensorDesc& output, const TensorDesc& grad_in,
                                    int64_t dim, bool log, const CoreParams& core, uint32_t grid) {
  const int64_t d = enough_work(grad_in, grid)
                        ? outermost_dim(grad_in, grid, every_dim_but(grad_in.dim(), dim))
                        : -1;
  if (d < 0) return build_softmax_backward(name, grad_out, output, grad_in, dim, log, core);
  return split_join(name, grad_in.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    return build_softmax_backward(name, slice_dim(grad_out, d, b0, b1),
                                  slice_dim(output, d, b0, b1), slice_dim(grad_in, d, b0, b1), dim,
                                  log, core);
  });
}

Program build_layer_norm_grid(const std::string& name, const LayerNormIo& io,
                              const CoreParams& core, uint32_t grid) {
  // Rows are the leading dims; the kernel reads mean/rstd as dense [rows] in row order, so only
  // the first dim splits (each part's rows a contiguous range of them).
  const int64_t lead = io.in.dim() - io.normalized_dims;
  const int64_t d = enough_work(io.in, grid) && lead > 0 && io.in.sizes[0] >= grid ? 0 : -1;
  if (d < 0) return build_layer_norm(name, io, core);
  return split_join(name, io.in.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    LayerNormIo part = io;
    part.in = slice_dim(io.in, d, b0, b1);
    part.out = slice_dim(io.out, d, b0, b1);
    if (io.mean) part.mean = slice_dim(*io.mean, d, b0, b1);
    if (io.rstd) part.rstd = slice_dim(*io.rstd, d, b0, b1);
    return build_layer_norm(name, part, core);
  });
}

Program build_matmul_grid(const std::string& name, const TensorDesc& a, const TensorDesc& b,
                          const TensorDesc& c, const std::optional<TensorDesc>& bias,
                          const MatmulSpec& spec, const CoreParams& core, uint32_t grid) {
  if (grid <= 1 || c.dim() < 2 || a.dim() != c.dim() || b.dim() != c.dim()) {
    return build_matmul(name, a, b, c, bias, spec, core);
  }
  const int64_t md = c.dim() - 2, nd = c.dim() - 1;
  const int64_t m = c.sizes[md], n = c.sizes[nd];
  const int64_t m_block = core.tensor.columns;          // stationary tile: 128 rows of C
  const int64_t n_block = core.tensor.moving_free_max;  // moving tile: 512 columns of C
  std::vector<Program> parts;
  if ((m + m_block - 1) / m_block >= grid) {
    for (const auto& [b0, b1] : split_range((m + m_block - 1) / m_block, grid)) {
      const int64_t r0 = b0 * m_block, r1 = std::min(m, b1 * m_block);
      parts.push_back(build_matmul(name, slice_dim(a, md, r0, r1), b, slice_dim(c, md, r0, r1),
                                   slice_bias(bias, c, md, r0, r1), spec, core));
    }
  } else if ((n + n_block - 1) / n_block >= grid) {
    for (const auto& [b0, b1] : split_range((n + n_block - 1) / n_block, grid)) {
      const int64_t c0 = b0 * n_block, c1 = std::min(n, b1 * n_block);
      parts.push_back(build_matmul(name, a, slice_dim(b, nd, c0, c1), slice_dim(c, nd, c0, c1),
                                   slice_bias(bias, c, nd, c0, c1), spec, core));
    }
  } else if (c.dim() > 2 && c.sizes[0] >= grid) {
    for (const auto& [b0, b1] : split_range(c.sizes[0], grid)) {
      parts.push_back(build_matmul(name, slice_dim(a, 0, b0, b1), slice_dim(b, 0, b0, b1),
                                   slice_dim(c, 0, b0, b1), slice_bias(bias, c, 0, b0, b1), spec,
                                   core));
    }
  } else {
    return build_matmul(name, a, b, c, bias, spec, core);
  }
  return join_instances(name, std::move(parts));
}

Program build_elementwise_grid(const std::string& name, const std::vector<TensorDesc>& inputs,
                               const TensorDesc& out, const Expr& expr, const CoreParams& core,
                               uint32_t grid) {
  const int64_t d = outermost_dim(out, grid);
  if (d < 0 || !enough_work(out, grid)) return build_elementwise(name, inputs, out, expr, core);
  std::vector<TensorDesc> full;
  for (const TensorDesc& in : inputs) full.push_back(broadcast_to(in, out.sizes));
  return split_join(name, out.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    std::vector<TensorDesc> ins;
    for (const TensorDesc& in : full) ins.push_back(slice_dim(in, d, b0, b1));
    return build_elementwise(name, ins, slice_dim(out, d, b0, b1), expr, core);
  });
}

Program build_copy_grid(const std::string& name, const TensorDesc& in, const TensorDesc& out,
                        const CoreParams& core, uint32_t grid) {
  const int64_t d = outermost_dim(out, grid);
  if (d < 0 || in.sizes != out.sizes || !enough_work(out, grid)) {
    return build_copy(name, in, out, core);
  }
  return split_join(name, out.sizes[d], grid, [&](int64_t b0, int64_t b1) {
    return build_copy(name, slice_dim(in, d, b0, b1), slice_dim(out, d, b0, b1), core);
  });
}

}  // namespace neuronsim::kernels
