#pragma once
// Checks a Program against the hardware rules before anything runs. The first violation throws a
// ValidationError naming the instruction index, the stream (engine) and the rule. Every rule has a
// stable identifier listed in device_model/docs/ISA.md ("Validation rules").
#include <functional>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"

namespace neuronsim::device_model {

struct ValidationContext {
  const CoreParams* core = nullptr;
  uint64_t hbm_capacity = 0;
  /// Optional: is [address, address + bytes) inside live device memory? (the allocator's view)
  std::function<bool(uint64_t address, uint64_t bytes)> hbm_range_valid;
  /// Physical cores a launch may span (chip.logical_core_size): Program::grid may not exceed it.
  uint32_t logical_core_size = 1;
};

void validate(const Program& program, const ValidationContext& ctx);

/// The stable rule identifiers, for documentation and tests.
const std::vector<std::string_view>& validation_rules();

}  // namespace neuronsim::device_model
