#include "neuronsim/device/program.h"

#include <fmt/format.h>

namespace neuronsim::device {

std::string StreamId::name() const {
  if (engine == EngineKind::kDma) return fmt::format("dma{}", queue);
  return std::string(engine_kind_name(engine));
}

std::string StreamId::display_name() const {
  if (engine == EngineKind::kDma) return fmt::format("DMA q{}", queue);
  return std::string(engine_display_name(engine));
}

std::optional<StreamId> parse_stream_id(std::string_view name) {
  for (EngineKind e :
       {EngineKind::kTensor, EngineKind::kVector, EngineKind::kScalar, EngineKind::kGpSimd}) {
    if (engine_kind_name(e) == name) return StreamId{e, 0};
  }
  if (name.size() > 3 && name.substr(0, 3) == "dma") {
    int q = 0;
    for (char c : name.substr(3)) {
      if (c < '0' || c > '9') return std::nullopt;
      q = q * 10 + (c - '0');
      if (q > 255) return std::nullopt;
    }
    return StreamId{EngineKind::kDma, static_cast<uint8_t>(q)};
  }
  return std::nullopt;
}

size_t Program::instruction_count() const {
  size_t n = 0;
  for (const auto& s : streams) n += s.instructions.size();
  return n;
}

Stream& Program::stream(StreamId id) {
  for (auto& s : streams) {
    if (s.id == id) return s;
  }
  streams.push_back(Stream{id, {}});
  return streams.back();
}

}  // namespace neuronsim::device
