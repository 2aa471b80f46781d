#include "neuronsim/runtime/program_cache.h"

#include <cstdlib>
#include <cstring>

namespace neuronsim::runtime {
namespace {

using device_model::AccessPattern;
using device_model::MemSpace;

// The region holding all of `ap`'s bytes, or -1.
int region_of(const AccessPattern& ap, const std::vector<HbmSpan>& regions) {
  const AccessPattern::Span s = ap.byte_span();
  for (size_t i = 0; i < regions.size(); ++i) {
    const auto lo = static_cast<int64_t>(regions[i].base);
    const auto hi = static_cast<int64_t>(regions[i].base + regions[i].bytes);
    if (s.lo >= lo && s.hi <= hi && s.lo < hi) return static_cast<int>(i);
  }
  return -1;
}

// Calls fn on each access pattern of an instruction that the opcode may use.
template <typename Fn>
bool for_each_hbm_ap(device_model::Instruction& in, Fn fn) {
  for (AccessPattern* ap :
       {&in.dst, &in.src0, &in.src1, &in.src2, &in.acc_dst, &in.operand0.ap, &in.operand1.ap}) {
    if (ap->space == MemSpace::kHbm && ap->elements() > 0 && !fn(*ap)) return false;
  }
  return true;
}

}  // namespace

bool addresses_within(const device_model::Program& program, const std::vector<HbmSpan>& regions) {
  for (const device_model::Stream& s : program.streams) {
    for (device_model::Instruction in : s.instructions) {
      if (!for_each_hbm_ap(in, [&](AccessPattern& ap) { return region_of(ap, regions) >= 0; }))
        return false;
    }
  }
  return true;
}

bool relocate(device_model::Program& program, const std::vector<HbmSpan>& from,
              const std::vector<HbmSpan>& to) {
  for (device_model::Stream& s : program.streams) {
    for (device_model::Instruction& in : s.instructions) {
      const bool ok = for_each_hbm_ap(in, [&](AccessPattern& ap) {
        const int r = region_of(ap, from);
        if (r < 0) return false;
        ap.offset = ap.offset - from[static_cast<size_t>(r)].base + to[static_cast<size_t>(r)].base;
        return true;
      });
      if (!ok) return false;
    }
  }
  for (device_model::HbmRegion& h : program.hbm_regions) {
    for (size_t i = 0; i < from.size(); ++i) {
      if (h.offset >= from[i].base && h.offset + h.bytes <= from[i].base + from[i].bytes) {
        h.offset = h.offset - from[i].base + to[i].base;
        break;
      }
    }
  }
  return true;
}

ProgramCache::ProgramCache(size_t capacity)
    : capacity_(capacity), enabled_(enabled_by_environment()) {}

bool ProgramCache::enabled_by_environment() {
  const char* v = std::getenv("NEURONSIM_PROGRAM_CACHE");
  return !(v && std::strcmp(v, "0") == 0);
}

void ProgramCache::set_enabled(bool on) {
  enabled_ = on;
  if (!on) clear();
}

const std::vector<device_model::Program>* ProgramCache::find(const std::string& key,
                                                             const std::vector<HbmSpan>& regions) {
  if (!enabled_) return nullptr;
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.regions.size() != regions.size()) {
    ++misses_;
    return nullptr;
  }
  Entry& e = it->second;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].bytes != e.regions[i].bytes) {
      ++misses_;
      return nullptr;
    }
  }
  if (e.regions != regions) {
    for (device_model::Program& p : e.programs) {
      if (!relocate(p, e.regions, regions)) {  // checked on insert: cannot happen
        entries_.erase(it);
        ++misses_;
        return nullptr;
      }
    }
    e.regions = regions;
  }
  ++hits_;
  return &e.programs;
}

bool ProgramCache::insert(const std::string& key, std::vector<device_model::Program> programs,
                          std::vector<HbmSpan> regions) {
  if (!enabled_) return false;
  for (const device_model::Program& p : programs) {
    if (!addresses_within(p, regions)) return false;
  }
  if (entries_.size() >= capacity_) entries_.clear();
  entries_[key] = Entry{std::move(programs), std::move(regions)};
  return true;
}

void ProgramCache::clear() {
  entries_.clear();
}

}  // namespace neuronsim::runtime
