#pragma once
// Programs as JSON (the serialised instruction stream tools read and write). Format in
// device_model/docs/ISA.md; parse errors name the JSON path of the offending field.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "neuronsim/device_model/program.h"

namespace neuronsim::device_model {

nlohmann::json program_to_json(const Program& program);
Program program_from_json(const nlohmann::json& j);
/// Parses text; throws ProgramFormatError for invalid JSON or an invalid program.
Program parse_program(std::string_view text);

nlohmann::json access_pattern_to_json(const AccessPattern& ap);
AccessPattern access_pattern_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace neuronsim::device_model
