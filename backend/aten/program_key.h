#pragma once
// The program cache's key for a native op invocation (runtime/program_cache.h): everything its
// timing builder reads (overload, every argument's dtype, sizes, strides, storage offset and
// storage size, which arguments share a storage, scalar values, the mode) and the HBM regions
// (distinct storages, in order of appearance) its programs address.
#include <string>
#include <vector>

#include "aten/native_ops.h"
#include "neuronsim/runtime/program_cache.h"

namespace neuronsim::backend {

struct ProgramKey {
  std::string key;
  std::vector<runtime::HbmSpan> regions;
};

/// The key of `inv` (its arguments and outputs), or nothing when some argument is not described
/// by shape and value alone (a CPU tensor that is not 0-dim, a generator, an unknown kind).
std::optional<ProgramKey> program_key(const OpInvocation& inv, bool functional);

}  // namespace neuronsim::backend
