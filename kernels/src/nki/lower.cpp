// NKI kernel expansion: the traced statement list becomes per-engine instruction streams. See
// lower.h; the Python side (python/neuronsim/nki) produced the statements.
#include "neuronsim/kernels/nki/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

#include "hazards.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/validator.h"
#include "tile_allocator.h"

namespace neuronsim::kernels::nki {

void Kernel::finalize() {
  std::vector<size_t> open;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i].kind == StmtKind::kLoop) open.push_back(i);
    if (body[i].kind == StmtKind::kEnd) {
      if (open.empty()) throw std::invalid_argument("loop end without a loop");
      body[open.back()].end = static_cast<uint32_t>(i);
      body[i].index = static_cast<uint32_t>(open.back());
      open.pop_back();
    }
  }
  if (!open.empty()) throw std::invalid_argument("loop without an end");
}

namespace {

using device_model::AccessPattern;
using device_model::Dim;
using device_model::EngineKind;
using device_model::Instruction;
using device_model::MemSpace;
using device_model::Opcode;
using device_model::StreamId;

// SBUF tiles start on 64-byte boundaries (the kernel library's allocators do the same).
constexpr uint64_t kSbufAlign = 64;
constexpr uint64_t kPsumAlign = 4;

int64_t ceil_div(int64_t a, int64_t b) {
  if (b < 0) a = -a, b = -b;
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

EngineKind default_engine(Opcode op) {
  switch (op) {
    case Opcode::kMatmul:
    case Opcode::kTranspose:
      return EngineKind::kTensor;
    case Opcode::kActivation:
      return EngineKind::kScalar;
    case Opcode::kIota:
    case Opcode::kRng:
      return EngineKind::kGpSimd;
    case Opcode::kDmaCopy:
      return EngineKind::kDma;
    default:
      return EngineKind::kVector;
  }
}

// The iteration-aligned form of an operand for one instance: partition axis, then free axes.
struct Resolved {
  bool present = false;
  int32_t buffer = -1;
  AccessPattern ap;  // dims not yet normalised (aligned with the op's free axes)
  int64_t part = 0;  // SBUF/PSUM: first partition within the buffer
  int64_t elem = 0;  // element offset from the buffer's start
};

// Drops size-1 free dims and merges dims that walk memory contiguously (element order is kept,
// which is all the engines pair operands by).
void normalise(AccessPattern& ap) {
  std::array<Dim, device_model::kMaxFreeDims> out{};
  int n = 0;
  for (int k = 0; k < ap.ndims; ++k) {
    const Dim d = ap.dims[k];
    if (d.size == 1) continue;
    if (n > 0 && out[n - 1].stride == d.stride * static_cast<int64_t>(d.size)) {
      out[n - 1] = {d.stride, out[n - 1].size * d.size};
      continue;
    }
    out[n++] = d;
  }
  ap.dims = out;
  ap.ndims = static_cast<uint8_t>(n);
}

struct Instance {
  bool live = false;
  uint64_t offset = 0;  // SBUF/PSUM byte offset
  bool zero_pending = false;
  bool matmul_written = false;
};

class Expander {
 public:
  Expander(const Kernel& k, const device_model::CoreParams& core, device_model::Program& program,
           uint32_t pcore, LowerStats& stats)
      : k_(k),
        core_(core),
        program_(program),
        pcore_(pcore),
        stats_(stats),
        sbuf_(core.sbuf.partition_bytes, kSbufAlign, 0),
        psum_(core.psum.partition_bytes, kPsumAlign, core.psum.bank_bytes()),
        instances_(k.buffers.size()),
        vars_(k.variables, 0) {
    // HBM tensors exist for the whole launch (the caller placed them).
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      if (k.buffers[b].space == MemSpace::kHbm) instances_[b].live = true;
    }
    // An HBM tensor no instruction writes (a kernel input) cannot be in a hazard: its reads
    // need no tracking (a tiled kernel reads its inputs tens of thousands of times).
    written_.assign(k.buffers.size(), false);
    for (const Op& op : k.ops) {
      if (op.dst.buffer >= 0) written_[static_cast<size_t>(op.dst.buffer)] = true;
      if (op.acc_dst.buffer >= 0) written_[static_cast<size_t>(op.acc_dst.buffer)] = true;
    }
  }

  void run() {
    if (k_.core_variable >= 0) vars_[static_cast<size_t>(k_.core_variable)] = pcore_;
    struct Frame {
      size_t begin;
      int64_t iter;
    };
    std::vector<Frame> loops;
    for (size_t pc = 0; pc < k_.body.size(); ++pc) {
      const Stmt& s = k_.body[pc];
      switch (s.kind) {
        case StmtKind::kLoop:
          if (s.trip <= 0) {
            pc = s.end;
            break;
          }
          vars_[s.index] = 0;
          loops.push_back({pc, 0});
          break;
        case StmtKind::kEnd: {
          Frame& f = loops.back();
          const Stmt& loop = k_.body[f.begin];
          if (++f.iter < loop.trip) {
            vars_[loop.index] = f.iter;
            pc = f.begin;
          } else {
            loops.pop_back();
          }
          break;
        }
        case StmtKind::kAlloc:
          alloc(s.index);
          break;
        case StmtKind::kFree:
          release(s.index);
          break;
        case StmtKind::kOp:
          op(k_.ops[s.index]);
          break;
      }
    }
    for (size_t b = 0; b < instances_.size(); ++b) {
      if (instances_[b].live) release(static_cast<uint32_t>(b));
    }
    stats_.sbuf_peak_bytes = std::max(stats_.sbuf_peak_bytes, sbuf_.peak());
    stats_.psum_peak_bytes = std::max(stats_.psum_peak_bytes, psum_.peak());
  }

 private:
  [[noreturn]] void fail(int32_t source, const std::string& rule, const std::string& msg) const {
    const std::string where = source >= 0 && static_cast<size_t>(source) < k_.sources.size()
                                  ? k_.sources[static_cast<size_t>(source)] + ": "
                                  : "";
    throw KernelError(rule, fmt::format("{}{}: {}{}", where, rule, msg, loop_values()));
  }
  std::string loop_values() const {
    std::string out;
    for (size_t v = 0; v < vars_.size(); ++v) {
      if (v == static_cast<size_t>(k_.core_variable) && k_.grid == 1) continue;
      out += fmt::format("{}{}", out.empty() ? "" : ", ", vars_[v]);
    }
    return out.empty() ? "" : " (loop indices " + out + ")";
  }

  void alloc(uint32_t b) {
    const Buffer& buf = k_.buffers[b];
    Instance& in = instances_[b];
    if (buf.space == MemSpace::kHbm) {
      in.live = true;
      return;
    }
    if (in.live) release(b);
    TileAllocator& a = buf.space == MemSpace::kSbuf ? sbuf_ : psum_;
    const auto off = a.allocate(buf.bytes);
    if (!off) {
      fail(buf.source, buf.space == MemSpace::kSbuf ? "sbuf-capacity" : "psum-capacity",
           fmt::format("{} {} ({} bytes per partition) does not fit: {} of {} bytes per partition "
                       "in use, largest free range {}",
                       buf.name, buf.shape, buf.bytes, a.in_use(), a.capacity(), a.largest_free()));
    }
    in = Instance{true, *off, false, false};
  }

  void release(uint32_t b) {
    const Buffer& buf = k_.buffers[b];
    Instance& in = instances_[b];
    if (!in.live) return;
    in.live = false;
    if (buf.space == MemSpace::kSbuf) sbuf_.release(in.offset, buf.bytes);
    if (buf.space == MemSpace::kPsum) psum_.release(in.offset, buf.bytes);
  }

  Resolved resolve(const Operand& o, int32_t source) {
    Resolved r;
    if (o.buffer < 0) return r;
    r.present = true;
    r.buffer = o.buffer;
    const Buffer& buf = k_.buffers[static_cast<size_t>(o.buffer)];
    if (!instances_[static_cast<size_t>(o.buffer)].live) {
      fail(source, "tile-scope",
           fmt::format("{} is used outside the loop body that declares it", buf.name));
    }
    AccessPattern& ap = r.ap;
    ap.space = buf.space;
    ap.dtype = o.dtype;
    ap.partitions = o.partitions;
    ap.partition_stride = o.partition_stride;
    if (o.dims.size() > 8) fail(source, "ap-shape", "more than 8 free axes");
    r.part = o.start_partition.eval(vars_);
    r.elem = o.offset.eval(vars_);
    ap.ndims = 0;
    dims_.assign(o.dims.begin(), o.dims.end());
    return r;
  }

  // Narrows every operand to the mask's bounds; false when the instance is empty.
  bool apply_clamps(const Op& op, std::vector<Resolved*>& ops, std::vector<std::vector<Dim>>& dims,
                    size_t scalars_from) {
    for (const Clamp& c : op.clamps) {
      const int64_t bound = ceil_div(c.numerator.eval(vars_), c.divisor);
      for (size_t i = 0; i < ops.size(); ++i) {
        Resolved& r = *ops[i];
        const bool hbm = r.ap.space == MemSpace::kHbm;
        int64_t size, stride;
        if (c.axis == 0) {
          size = r.ap.partitions;
          stride = hbm ? r.ap.partition_stride : 0;
        } else if (i >= scalars_from) {
          continue;  // a per-partition scalar ([P, 1]) follows the partition bound only
        } else if (c.axis <= dims[i].size()) {
          size = dims[i][c.axis - 1].size;
          stride = dims[i][c.axis - 1].stride;
        } else {
          continue;
        }
        int64_t lo = 0, hi = size;
        if (c.upper) {
          hi = std::min(hi, bound);
        } else {
          lo = std::max<int64_t>(0, bound);
        }
        if (hi <= lo) return false;
        r.elem += lo * stride;
        if (c.axis == 0) {
          if (!hbm) r.part += lo;
          r.ap.partitions = static_cast<uint32_t>(hi - lo);
        } else {
          dims[i][c.axis - 1].size = static_cast<uint32_t>(hi - lo);
        }
      }
    }
    return true;
  }

  // Places a resolved operand at its instance's address and checks it stays inside its tensor.
  void place(Resolved& r, const std::vector<Dim>& dims, int32_t source) {
    const Buffer& buf = k_.buffers[static_cast<size_t>(r.buffer)];
    AccessPattern& ap = r.ap;
    const int64_t es = static_cast<int64_t>(device_model::dtype_size(ap.dtype));
    int64_t lo = r.elem, hi = r.elem;
    for (const Dim& d : dims) {
      const int64_t reach = d.stride * (static_cast<int64_t>(d.size) - 1);
      (reach < 0 ? lo : hi) += reach;
    }
    if (ap.space == MemSpace::kHbm) {
      const int64_t reach = ap.partition_stride * (static_cast<int64_t>(ap.partitions) - 1);
      (reach < 0 ? lo : hi) += reach;
    }
    const int64_t limit = static_cast<int64_t>(buf.bytes) / es;
    const bool parts_ok =
        ap.space == MemSpace::kHbm ||
        (r.part >= 0 && r.part + static_cast<int64_t>(ap.partitions) <= buf.partitions);
    if (lo < 0 || hi >= limit || !parts_ok) {
      if (!parts_ok) {
        fail(source, "out-of-bounds",
             fmt::format("partitions {}..{} outside {} {} ({} partitions)", r.part,
                         r.part + ap.partitions - 1, buf.name, buf.shape, buf.partitions));
      }
      fail(source, "out-of-bounds",
           fmt::format("elements {}..{} outside {} {} ({} elements{})", lo, hi, buf.name, buf.shape,
                       limit, ap.space == MemSpace::kHbm ? "" : " per partition"));
    }
    if (ap.space == MemSpace::kHbm) {
      ap.start_partition = 0;
      ap.offset = buf.hbm_address + static_cast<uint64_t>(r.elem * es);
    } else {
      const Instance& in = instances_[static_cast<size_t>(r.buffer)];
      ap.start_partition = static_cast<uint32_t>(r.part);
      ap.partition_stride = 0;
      ap.offset = in.offset + static_cast<uint64_t>(r.elem * es);
    }
  }

  // Fits the free dims into the hardware's four, splitting the instruction along its
  // outermost axes when they cannot be merged.
  static bool fits(const std::vector<Dim>& d) {
    int n = 0;
    std::array<Dim, 16> out{};
    for (const Dim& x : d) {
      if (x.size == 1) continue;
      if (n > 0 && out[n - 1].stride == x.stride * static_cast<int64_t>(x.size)) {
        out[n - 1] = {x.stride, out[n - 1].size * x.size};
        continue;
      }
      if (n == 16) return false;
      out[n++] = x;
    }
    return n <= device_model::kMaxFreeDims;
  }

  void op(const Op& o) {
    // Resolve every operand for this iteration.
    Resolved dst = resolve(o.dst, o.source);
    std::vector<Dim> dst_dims = dims_;
    Resolved src0 = resolve(o.src0, o.source);
    std::vector<Dim> src0_dims = dims_;
    Resolved src1 = resolve(o.src1, o.source);
    std::vector<Dim> src1_dims = dims_;
    Resolved src2 = resolve(o.src2, o.source);
    std::vector<Dim> src2_dims = dims_;
    Resolved acc = resolve(o.acc_dst, o.source);
    std::vector<Dim> acc_dims = dims_;
    Resolved s0 = o.operand0.from_operand ? resolve(o.operand0.operand, o.source) : Resolved{};
    std::vector<Dim> s0_dims = dims_;
    Resolved s1 = o.operand1.from_operand ? resolve(o.operand1.operand, o.source) : Resolved{};
    std::vector<Dim> s1_dims = dims_;

    std::vector<Resolved*> all;
    std::vector<std::vector<Dim>> all_dims;
    auto add = [&](Resolved& r, std::vector<Dim>& d) {
      if (r.present) {
        all.push_back(&r);
        all_dims.push_back(d);
      }
    };
    add(dst, dst_dims);
    add(src0, src0_dims);
    add(src1, src1_dims);
    add(src2, src2_dims);
    add(acc, acc_dims);
    const size_t scalars_from = all.size();
    add(s0, s0_dims);
    add(s1, s1_dims);
    if (!o.clamps.empty() && !apply_clamps(o, all, all_dims, scalars_from)) return;
    for (size_t i = 0; i < all.size(); ++i) place(*all[i], all_dims[i], o.source);

    // PSUM tiles whose zeroing was elided: materialise it before anything but a matmul reads.
    for (size_t i = 0; i < all.size(); ++i) {
      const int32_t b = all[i]->buffer;
      Instance& in = instances_[static_cast<size_t>(b)];
      if (!in.zero_pending) continue;
      const bool is_matmul_dst = o.inst.op == Opcode::kMatmul && all[i] == &dst;
      const bool is_zeroing = o.inst.op == Opcode::kMemset && all[i] == &dst;
      if (!is_matmul_dst && !is_zeroing) materialise_zero(b, o.source);
    }
    if (o.inst.op == Opcode::kMemset && dst.present) {
      const Buffer& buf = k_.buffers[static_cast<size_t>(dst.buffer)];
      if (buf.elide_zero) {
        Instance& in = instances_[static_cast<size_t>(dst.buffer)];
        in.zero_pending = true;
        in.matmul_written = false;
        return;
      }
    }

    Instruction inst = o.inst;
    if (o.inst.op == Opcode::kMatmul) {
      Instance& in = instances_[static_cast<size_t>(dst.buffer)];
      switch (o.accumulate) {
        case Accumulate::kOverwrite:
          inst.accumulate = false;
          break;
        case Accumulate::kAccumulate:
          inst.accumulate = !in.zero_pending;
          break;
        case Accumulate::kFirstOverwrites:
          inst.accumulate = in.matmul_written && !in.zero_pending;
          break;
      }
      in.zero_pending = false;
      in.matmul_written = true;
    }
    const EngineKind engine = o.engine.value_or(default_engine(o.inst.op));
    emit_split(inst, engine, o.source, dst, dst_dims, src0, src0_dims, src1, src1_dims, src2,
               src2_dims, acc, acc_dims, s0, s1);
  }

  void materialise_zero(int32_t b, int32_t source) {
    const Buffer& buf = k_.buffers[static_cast<size_t>(b)];
    Instance& in = instances_[static_cast<size_t>(b)];
    in.zero_pending = false;
    Instruction z;
    z.op = Opcode::kMemset;
    z.imm = 0.0f;
    z.dst.space = buf.space;
    z.dst.dtype = device_model::DType::kFp32;
    z.dst.start_partition = 0;
    z.dst.partitions = buf.partitions;
    z.dst.offset = in.offset;
    z.dst.ndims = 1;
    z.dst.dims[0] = {1, static_cast<uint32_t>(buf.bytes / 4)};
    untracked_.fill(false);
    emit(z, EngineKind::kVector, source);
  }

  // Splits an elementwise instruction whose free dims do not fit the AP (or an engine's
  // free-size limit) along the outermost free axis, then emits each part.
  void emit_split(Instruction inst, EngineKind engine, int32_t source, Resolved& dst,
                  std::vector<Dim>& dd, Resolved& a, std::vector<Dim>& ad, Resolved& b,
                  std::vector<Dim>& bd, Resolved& c, std::vector<Dim>& cd, Resolved& acc,
                  std::vector<Dim>& accd, Resolved& s0, Resolved& s1) {
    auto free_elems = [](const std::vector<Dim>& d) {
      uint64_t n = 1;
      for (const Dim& x : d) n *= x.size;
      return n;
    };
    uint64_t limit = std::numeric_limits<uint64_t>::max();
    if (engine == EngineKind::kVector) {
      const bool psum = (dst.present && dst.ap.space == MemSpace::kPsum) ||
                        (a.present && a.ap.space == MemSpace::kPsum) ||
                        (b.present && b.ap.space == MemSpace::kPsum);
      limit = psum ? core_.vector.max_free_elements_psum : core_.vector.max_free_elements_sbuf;
      if (limit == 0) limit = std::numeric_limits<uint64_t>::max();
    }
    const bool elementwise = inst.op != Opcode::kMatmul && inst.op != Opcode::kTranspose &&
                             inst.op != Opcode::kTensorReduce;
    const bool too_big = elementwise && dst.present && free_elems(dd) > limit;
    const bool too_many = (dst.present && !fits(dd)) || (a.present && !fits(ad)) ||
                          (b.present && !fits(bd)) || (c.present && !fits(cd));
    if ((too_big || too_many) && elementwise && dst.present && !dd.empty()) {
      // The outermost axis of size > 1, shared by every operand of an elementwise op.
      size_t axis = 0;
      while (axis < dd.size() && dd[axis].size == 1) ++axis;
      if (axis < dd.size()) {
        uint64_t inner = 1;
        for (size_t k = axis + 1; k < dd.size(); ++k) inner *= dd[k].size;
        uint64_t step = 1;
        if (too_big && !too_many && inner <= limit) step = std::max<uint64_t>(1, limit / inner);
        const uint32_t n = dd[axis].size;
        for (uint64_t start = 0; start < n; start += step) {
          const auto cnt = static_cast<uint32_t>(std::min<uint64_t>(step, n - start));
          auto piece = [&](Resolved r, std::vector<Dim> d) {
            if (r.present && axis < d.size()) {
              const int64_t es = static_cast<int64_t>(device_model::dtype_size(r.ap.dtype));
              r.ap.offset +=
                  static_cast<uint64_t>(static_cast<int64_t>(start) * d[axis].stride * es);
              d[axis].size = cnt;
            }
            return std::make_pair(r, d);
          };
          auto [pd, pdd] = piece(dst, dd);
          auto [pa, pad] = piece(a, ad);
          auto [pb, pbd] = piece(b, bd);
          auto [pc, pcd] = piece(c, cd);
          auto [pacc, paccd] = piece(acc, accd);
          if (cnt == n) {  // cannot split further along this axis: drop it and go inward
            fail(source, "ap-shape", "an operand's free axes do not fit four access dimensions");
          }
          emit_split(inst, engine, source, pd, pdd, pa, pad, pb, pbd, pc, pcd, pacc, paccd, s0, s1);
        }
        return;
      }
    }
    auto finish = [&](Resolved& r, const std::vector<Dim>& d, AccessPattern& out) {
      if (!r.present) return;
      out = r.ap;
      out.ndims = 0;
      int n = 0;
      std::array<Dim, device_model::kMaxFreeDims> dims{};
      for (const Dim& x : d) {
        if (x.size == 1) continue;
        if (n > 0 && dims[n - 1].stride == x.stride * static_cast<int64_t>(x.size)) {
          dims[n - 1] = {x.stride, dims[n - 1].size * x.size};
          continue;
        }
        if (n == device_model::kMaxFreeDims) {
          fail(source, "ap-shape", "an operand's free axes do not fit four access dimensions");
        }
        dims[n++] = x;
      }
      out.dims = dims;
      out.ndims = static_cast<uint8_t>(n);
    };
    // Matmul, transpose and reduce keep their operands' dim structure (the engine reads M, N
    // and the reduced axes from it); the others are free to merge.
    auto keep = [&](Resolved& r, const std::vector<Dim>& d, AccessPattern& out) {
      if (!r.present) return;
      out = r.ap;
      int n = 0;
      std::array<Dim, device_model::kMaxFreeDims> dims{};
      for (const Dim& x : d) {
        if (n == device_model::kMaxFreeDims) {
          fail(source, "ap-shape", "more than four free axes");
        }
        dims[n++] = x;
      }
      out.dims = dims;
      out.ndims = static_cast<uint8_t>(n);
    };
    if (inst.op == Opcode::kTensorReduce || inst.op == Opcode::kMatmul ||
        inst.op == Opcode::kTranspose) {
      keep(dst, dd, inst.dst);
      keep(a, ad, inst.src0);
      keep(b, bd, inst.src1);
      if (inst.op == Opcode::kMatmul || inst.op == Opcode::kTranspose) {
        // The engine contracts over partitions; M and N are the free sizes, one dim each.
        normalise(inst.dst);
        normalise(inst.src0);
        normalise(inst.src1);
      }
    } else {
      finish(dst, dd, inst.dst);
      finish(a, ad, inst.src0);
      finish(b, bd, inst.src1);
      finish(c, cd, inst.src2);
    }
    if (c.present) inst.has_src2 = true;
    if (acc.present) {
      finish(acc, accd, inst.acc_dst);
      inst.has_acc_dst = true;
    }
    if (s0.present) {
      inst.operand0.from_ap = true;
      inst.operand0.ap = s0.ap;
      inst.operand0.ap.ndims = 1;
      inst.operand0.ap.dims[0] = {1, 1};
    }
    if (s1.present) {
      inst.operand1.from_ap = true;
      inst.operand1.ap = s1.ap;
      inst.operand1.ap.ndims = 1;
      inst.operand1.ap.dims[0] = {1, 1};
    }
    // Reads of HBM tensors nothing writes need no hazard tracking.
    untracked_.fill(false);
    if (a.present && a.ap.space == MemSpace::kHbm && !written_[static_cast<size_t>(a.buffer)]) {
      untracked_[0] = true;
    }
    emit(inst, engine, source);
  }

  // ---- streams and synchronisation ----
  uint32_t stream_index(StreamId id) {
    for (uint32_t i = 0; i < streams_.size(); ++i) {
      if (streams_[i] == id) return i;
    }
    streams_.push_back(id);
    seq_.push_back(0);
    signals_.push_back(0);
    marks_.emplace_back();
    waited_.emplace_back();
    return static_cast<uint32_t>(streams_.size() - 1);
  }

  StreamId pick_stream(EngineKind e) {
    if (e != EngineKind::kDma) return {e, 0, static_cast<uint8_t>(pcore_)};
    const auto q = static_cast<uint8_t>(next_queue_++ % std::max<uint32_t>(1, core_.dma.queues));
    return {EngineKind::kDma, q, static_cast<uint8_t>(pcore_)};
  }

  void append(uint32_t s, const Instruction& in, int32_t source) {
    device_model::Stream& st = program_.stream(streams_[s]);
    st.instructions.push_back(in);
    st.sources.push_back(source >= 0 ? static_cast<uint32_t>(source) : device_model::kNoSource);
  }

  void wait_for(uint32_t s, uint32_t on, uint64_t seq, int32_t source) {
    // The first mark of `on` covering `seq`, placed now if none does yet.
    auto& marks = marks_[on];
    int32_t value = 0;
    if (!marks.empty() && marks.back().first >= seq) {
      const auto it = std::lower_bound(
          marks.begin(), marks.end(), seq,
          [](const std::pair<uint64_t, int32_t>& m, uint64_t q) { return m.first < q; });
      value = it->second;
    } else {
      value = ++signals_[on];
      Instruction sig;
      sig.op = Opcode::kSemSignal;
      sig.sem = static_cast<uint16_t>(on);
      sig.sem_value = 1;
      append(on, sig, source);
      marks.emplace_back(seq_[on], value);
    }
    auto& w = waited_[s];
    if (w.size() <= on) w.resize(on + 1, 0);
    if (w[on] >= value) return;
    w[on] = value;
    Instruction wait;
    wait.op = Opcode::kSemWait;
    wait.sem = static_cast<uint16_t>(on);
    wait.sem_value = value;
    append(s, wait, source);
    ++stats_.semaphore_waits;
  }

  void emit(const Instruction& in, EngineKind engine, int32_t source) {
    const uint32_t s = stream_index(pick_stream(engine));
    if (streams_.size() > core_.semaphores) {
      fail(source, "semaphore-range", "more streams than the core has semaphores");
    }
    // Reads and writes of this instruction.
    std::array<std::pair<const AccessPattern*, bool>, 8> acc{};
    size_t n = 0;
    auto read = [&](const AccessPattern& ap) { acc[n++] = {&ap, false}; };
    auto write = [&](const AccessPattern& ap) { acc[n++] = {&ap, true}; };
    switch (in.op) {
      case Opcode::kMemset:
      case Opcode::kIota:
      case Opcode::kRng:
        break;
      case Opcode::kMatmul:
      case Opcode::kTensorTensor:
      case Opcode::kSelect:
        read(in.src0);
        read(in.src1);
        if (in.has_src2) read(in.src2);
        break;
      default:
        read(in.src0);
    }
    if (in.operand0.from_ap) read(in.operand0.ap);
    if (in.operand1.from_ap) read(in.operand1.ap);
    write(in.dst);
    if (in.has_acc_dst) write(in.acc_dst);
    need_.assign(streams_.size(), 0);
    std::array<Region, 8> regions{};
    for (size_t i = 0; i < n; ++i) {
      // acc[0] is src0's read (when the opcode reads it): untracked for a read-only input.
      if (i == 0 && untracked_[0] && !acc[i].second && acc[i].first == &in.src0) {
        regions[i] = Region{MemSpace::kHbm, 0, 1, 0, 0};  // empty: nothing recorded
        continue;
      }
      regions[i] = region_of(*acc[i].first);
      hazards_.dependences(regions[i], acc[i].second, s, need_);
    }
    for (uint32_t t = 0; t < need_.size(); ++t) {
      if (t != s && need_[t] > 0) wait_for(s, t, need_[t], source);
    }
    append(s, in, source);
    const uint64_t seq = ++seq_[s];
    for (size_t i = 0; i < n; ++i) hazards_.record(regions[i], acc[i].second, s, seq);
    ++stats_.instructions;
  }

  const Kernel& k_;
  const device_model::CoreParams& core_;
  device_model::Program& program_;
  uint32_t pcore_;
  LowerStats& stats_;
  TileAllocator sbuf_, psum_;
  std::vector<Instance> instances_;
  std::vector<int64_t> vars_;
  std::vector<Dim> dims_;
  HazardTracker hazards_;
  std::vector<StreamId> streams_;
  std::vector<uint64_t> seq_;                                     // data instructions per stream
  std::vector<int32_t> signals_;                                  // signals per stream
  std::vector<std::vector<std::pair<uint64_t, int32_t>>> marks_;  // (seq covered, value)
  std::vector<std::vector<int32_t>> waited_;                      // [stream][on] value waited
  std::vector<uint64_t> need_;
  std::vector<bool> written_;        // per buffer: does any instruction write it
  std::array<bool, 1> untracked_{};  // the instruction being emitted reads a read-only input
  uint32_t next_queue_ = 0;
};

}  // namespace

device_model::Program lower(const Kernel& kernel, const device_model::CoreParams& core,
                            LowerStats* stats) {
  LowerStats local;
  LowerStats& st = stats ? *stats : local;
  device_model::Program program;
  program.name = kernel.name;
  program.grid = std::max<uint32_t>(1, kernel.grid);
  program.sources = kernel.sources;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t p = 0; p < program.grid; ++p) {
    Expander(kernel, core, program, p, st).run();
  }
  const auto t1 = std::chrono::steady_clock::now();
  st.expand_seconds = std::chrono::duration<double>(t1 - t0).count();
  // The chip's rules, with the kernel line of the instruction that breaks one.
  device_model::ValidationContext ctx;
  ctx.core = &core;
  ctx.hbm_capacity = std::numeric_limits<uint64_t>::max();
  ctx.logical_core_size = program.grid;
  try {
    device_model::validate(program, ctx);
  } catch (const device_model::ValidationError& e) {
    std::string where;
    for (const device_model::Stream& s : program.streams) {
      if (s.id.name() != e.stream() || e.instruction_index() < 0) continue;
      const auto i = static_cast<size_t>(e.instruction_index());
      if (i < s.sources.size() && s.sources[i] < program.sources.size()) {
        where = program.sources[s.sources[i]] + ": ";
      }
    }
    throw KernelError(e.rule(), where + e.what());
  }
  st.validate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return program;
}

}  // namespace neuronsim::kernels::nki
