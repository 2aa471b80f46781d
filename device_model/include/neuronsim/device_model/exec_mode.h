#pragma once
// What a run computes: data only, time only, or both.
#include <optional>
#include <string_view>

namespace neuronsim::device_model {

enum class ExecMode { kFull, kTiming, kFunctional };
std::string_view exec_mode_name(ExecMode m);
std::optional<ExecMode> parse_exec_mode(std::string_view name);

}  // namespace neuronsim::device_model
