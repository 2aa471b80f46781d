#include "neuronsim/device_model/errors.h"

#include <fmt/format.h>

namespace neuronsim::device_model {

ValidationError::ValidationError(int64_t instruction_index, std::string stream, std::string opcode,
                                 std::string rule, const std::string& detail)
    : Error(fmt::format("instruction {} on {} ({}): rule '{}': {}", instruction_index, stream,
                        opcode, rule, detail)),
      index_(instruction_index),
      stream_(std::move(stream)),
      opcode_(std::move(opcode)),
      rule_(std::move(rule)) {}

namespace {
std::string format_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.2f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} bytes", b);
}
}  // namespace

OutOfMemoryError::OutOfMemoryError(uint64_t requested, uint64_t free, uint64_t capacity,
                                   const std::string& where)
    : Error(fmt::format("out of memory on {}: tried to allocate {}; {} free of {} total capacity",
                        where, format_bytes(requested), format_bytes(free),
                        format_bytes(capacity))),
      requested_(requested),
      free_(free),
      capacity_(capacity) {}

OutOfMemoryError::OutOfMemoryError(uint64_t requested, uint64_t free, uint64_t capacity,
                                   const std::string& message, bool)
    : Error(message), requested_(requested), free_(free), capacity_(capacity) {}

}  // namespace neuronsim::device_model
