#include "neuronsim/kernels/compiler/link.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/compiler/fusion.h"

namespace neuronsim::kernels::compiler {

using device_model::AccessPattern;
using device_model::Instruction;
using device_model::MemSpace;
using device_model::Opcode;
using device_model::StreamId;

namespace {

constexpr uint64_t kVirtualMask = (uint64_t{1} << 40) - 1;

uint16_t sem_of(StreamId s) {
  return static_cast<uint16_t>(s.engine == device_model::EngineKind::kDma
                                   ? device_model::kComputeEngineCount + s.queue
                                   : static_cast<int>(s.engine));
}

struct Span {
  int64_t lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
  bool overlaps(const Span& o) const { return !empty() && !o.empty() && lo < o.hi && o.lo < hi; }
  void add(const Span& o) {
    if (o.empty()) return;
    if (empty()) {
      *this = o;
    } else {
      lo = std::min(lo, o.lo);
      hi = std::max(hi, o.hi);
    }
  }
};

// What one instruction, or one stream of a part, touches.
struct Footprint {
  Span sbuf, psum;
  std::set<int> hbm_read, hbm_write;  // roots
  void add(const Footprint& o) {
    sbuf.add(o.sbuf);
    psum.add(o.psum);
    hbm_read.insert(o.hbm_read.begin(), o.hbm_read.end());
    hbm_write.insert(o.hbm_write.begin(), o.hbm_write.end());
  }
};

bool intersects(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a) {
    if (b.count(x)) return true;
  }
  return false;
}

bool conflicts(const Footprint& a, const Footprint& b) {
  return a.sbuf.overlaps(b.sbuf) || a.psum.overlaps(b.psum) ||
         intersects(a.hbm_write, b.hbm_read) || intersects(a.hbm_write, b.hbm_write) ||
         intersects(a.hbm_read, b.hbm_write);
}

Footprint footprint_of(Instruction& in, const std::vector<int>& root) {
  Footprint f;
  for_each_operand(in, [&](AccessPattern& ap, bool write) {
    const auto span = ap.byte_span();
    if (ap.space == MemSpace::kSbuf) {
      f.sbuf.add({span.lo, span.hi});
    } else if (ap.space == MemSpace::kPsum) {
      f.psum.add({span.lo, span.hi});
    } else {
      const int v = virtual_value(ap.offset);
      if (v < 0) return;
      const int r = static_cast<size_t>(v) < root.size() ? root[static_cast<size_t>(v)] : v;
      (write ? f.hbm_write : f.hbm_read).insert(r);
    }
  });
  return f;
}

// One stream of a linked part: where its end mark puts its semaphore.
struct StreamEnd {
  uint16_t sem = 0;
  int32_t end_mark = 0;
  Footprint fp;
  bool loads = false;  // a DMA queue that only reads HBM
};
struct PartEnd {
  std::vector<StreamEnd> streams;
  bool barrier = false;
};

}  // namespace

LinkedProgram link(const std::string& name, std::vector<Part> parts, const std::vector<int>& root,
                   const device_model::CoreParams& core) {
  LinkedProgram out;
  out.program.name = name;
  std::vector<int32_t> total(core.semaphores, 0);  // signals so far, per semaphore
  std::vector<PartEnd> done;
  // Per output stream: the semaphore values it has already waited for.
  std::map<std::string, std::vector<int32_t>> waited;
  for (size_t j = 0; j < parts.size(); ++j) {
    Part& part = parts[j];
    device_model::Program& p = part.program;
    out.program.sections.push_back({part.name, part.detail});
    const std::vector<int32_t> base = total;
    PartEnd end;
    end.barrier = part.barrier;
    std::vector<int32_t> signalled(core.semaphores, 0);
    for (device_model::Stream& s : p.streams) {
      if (s.instructions.empty()) continue;
      // Windows, then what each instruction touches.
      std::vector<Footprint> fps(s.instructions.size());
      Footprint all;
      for (size_t k = 0; k < s.instructions.size(); ++k) {
        Instruction& in = s.instructions[k];
        for_each_operand(in, [&](AccessPattern& ap, bool) {
          if (ap.space == MemSpace::kSbuf) ap.offset += part.sbuf_base;
          if (ap.space == MemSpace::kPsum) ap.offset += part.psum_base;
        });
        fps[k] = footprint_of(in, root);
        all.add(fps[k]);
      }
      // Earlier streams this one may have to wait for, newest first; `always` when either
      // part is a barrier (then before the first data instruction).
      const uint16_t own = sem_of(s.id);
      std::vector<std::pair<const StreamEnd*, bool>> candidates;
      const bool loads = s.id.engine == device_model::EngineKind::kDma && all.hbm_write.empty();
      for (size_t i = done.size(); i-- > 0;) {
        for (const StreamEnd& e : done[i].streams) {
          if (e.sem == own) continue;  // a stream runs in order
          // The second part prefetches after the first part's loads: at a launch's start both
          // parts' loads would otherwise share the DMA engines, and the first part's compute
          // waited for its operands while the second's prefetch took their bandwidth.
          const bool prefetch = loads && done.size() == 1 && e.loads;
          const bool always = part.barrier || done[i].barrier || prefetch;
          if (always || conflicts(all, e.fp)) candidates.emplace_back(&e, always);
        }
      }
      device_model::Stream& os = out.program.stream(s.id);
      auto& w = waited[s.id.name()];
      if (w.empty()) w.assign(core.semaphores, 0);
      os.section_marks.emplace_back(static_cast<uint32_t>(os.instructions.size()),
                                    static_cast<uint32_t>(j));
      const uint32_t stream_index = static_cast<uint32_t>(&os - out.program.streams.data());
      for (size_t k = 0; k < s.instructions.size(); ++k) {
        Instruction in = s.instructions[k];
        if (in.op == Opcode::kSemWait) {
          in.sem_value += base.at(in.sem);
          os.instructions.push_back(in);
          continue;
        }
        if (in.op == Opcode::kSemSignal) {
          signalled.at(in.sem) += in.sem_value;
          os.instructions.push_back(in);
          continue;
        }
        for (const auto& [e, always] : candidates) {
          if (e->end_mark <= w[e->sem]) continue;
          if (!always && !conflicts(fps[k], e->fp)) continue;
          os.instructions.push_back(device_model::isa::sem_wait(e->sem, e->end_mark));
          w[e->sem] = e->end_mark;
        }
        const uint32_t idx = static_cast<uint32_t>(os.instructions.size());
        uint8_t field = 0;
        for (AccessPattern* ap : {&in.dst, &in.src0, &in.src1, &in.src2}) {
          if (ap->space == MemSpace::kHbm && virtual_value(ap->offset) >= 0 &&
              in.op == Opcode::kDmaCopy && field <= 1) {
            out.relocations.push_back(
                {stream_index, idx, field, virtual_value(ap->offset), ap->offset & kVirtualMask});
          }
          ++field;
        }
        os.instructions.push_back(in);
      }
      // The end mark later parts wait on.
      os.instructions.push_back(device_model::isa::sem_signal(own, 1));
      signalled.at(own) += 1;
      StreamEnd se;
      se.sem = own;
      se.loads = loads;
      se.fp = std::move(all);
      end.streams.push_back(std::move(se));
    }
    for (size_t i = 0; i < total.size(); ++i) total[i] += signalled[i];
    for (StreamEnd& se : end.streams) se.end_mark = total.at(se.sem);
    done.push_back(std::move(end));
  }
  return out;
}

void relocate(LinkedProgram& p, const std::vector<uint64_t>& address) {
  for (const Relocation& r : p.relocations) {
    if (r.value < 0 || static_cast<size_t>(r.value) >= address.size() ||
        address[static_cast<size_t>(r.value)] == kNoAddress) {
      throw std::invalid_argument(
          fmt::format("{}: no device address for value {}", p.program.name, r.value));
    }
    Instruction& in = p.program.streams.at(r.stream).instructions.at(r.instr);
    AccessPattern* aps[] = {&in.dst, &in.src0, &in.src1, &in.src2};
    aps[r.field]->offset = address[static_cast<size_t>(r.value)] + r.offset;
  }
}

}  // namespace neuronsim::kernels::compiler
