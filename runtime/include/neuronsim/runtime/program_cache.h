#pragma once
// Built and validated programs, kept by what they were built from, so a repeated op skips
// building and validation. The caller's key names everything a builder reads (op, sizes,
// strides, dtypes, storage offsets, scalar arguments, mode); HBM addresses are not in it: each
// entry remembers the HBM regions (the tensors' storages) its programs address, and a hit moves
// those addresses to the new call's regions. The runtime owns one cache per configuration
// (preset and overrides), so a new configuration starts empty. NEURONSIM_PROGRAM_CACHE=0 turns
// it off.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuronsim/device_model/program.h"

namespace neuronsim::runtime {

/// An HBM range a program addresses: a tensor's storage.
struct HbmSpan {
  uint64_t base = 0;
  uint64_t bytes = 0;
  bool operator==(const HbmSpan&) const = default;
};

/// Moves every HBM access of `program` that lies in from[i] by to[i].base - from[i].base (the
/// declared hbm_regions too). Returns false, leaving the program partly moved, when an HBM
/// access is not wholly inside one of `from` (such a program cannot be cached).
bool relocate(device_model::Program& program, const std::vector<HbmSpan>& from,
              const std::vector<HbmSpan>& to);

/// Whether every HBM access of `program` lies wholly inside one of `regions`.
bool addresses_within(const device_model::Program& program, const std::vector<HbmSpan>& regions);

class ProgramCache {
 public:
  /// `capacity` entries at most: a full cache starts over (a loop's ops come back at once).
  explicit ProgramCache(size_t capacity = 4096);
  /// NEURONSIM_PROGRAM_CACHE: "0" disables the cache; unset or "1" enables it.
  static bool enabled_by_environment();

  /// The programs cached under `key`, moved to address `regions` (one per region they were
  /// stored with, of the same sizes); null on a miss. Valid until the next call.
  const std::vector<device_model::Program>* find(const std::string& key,
                                                 const std::vector<HbmSpan>& regions);
  /// Keeps `programs` (validated, built to address `regions`) under `key`. Returns false and
  /// keeps nothing when a program addresses HBM outside `regions`.
  bool insert(const std::string& key, std::vector<device_model::Program> programs,
              std::vector<HbmSpan> regions);
  void clear();

  bool enabled() const { return enabled_; }
  void set_enabled(bool on);
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::vector<device_model::Program> programs;
    std::vector<HbmSpan> regions;  // what the programs address now
  };
  std::unordered_map<std::string, Entry> entries_;
  size_t capacity_;
  bool enabled_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace neuronsim::runtime
