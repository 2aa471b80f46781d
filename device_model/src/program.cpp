#include "neuronsim/device_model/program.h"

#include <fmt/format.h>

namespace neuronsim::device_model {

std::string StreamId::name() const {
  std::string n = engine == EngineKind::kDma ? fmt::format("{}{}", engine_kind_name(engine), queue)
                                             : std::string(engine_kind_name(engine));
  return pcore == 0 ? n : fmt::format("pcore{}.{}", pcore, n);
}

std::string StreamId::display_name() const {
  if (engine == EngineKind::kDma) return fmt::format("{}{}", kDmaQueueRowPrefix, queue);
  return std::string(engine_display_name(engine));
}

std::optional<StreamId> parse_stream_id(std::string_view name) {
  // "pcore<N>.<stream>" for program instance N >= 1 (instance 0 has no prefix).
  if (name.substr(0, 5) == "pcore") {
    const size_t dot = name.find('.');
    if (dot == std::string_view::npos || dot == 5) return std::nullopt;
    int p = 0;
    for (char c : name.substr(5, dot - 5)) {
      if (c < '0' || c > '9') return std::nullopt;
      p = p * 10 + (c - '0');
      if (p > 255) return std::nullopt;
    }
    if (p == 0 || name[5] == '0') return std::nullopt;  // canonical spelling only
    auto id = parse_stream_id(name.substr(dot + 1));
    if (!id || id->pcore != 0) return std::nullopt;
    id->pcore = static_cast<uint8_t>(p);
    return id;
  }
  for (const EngineInfo& e : kEngines) {
    if (e.compute && e.stream == name) return StreamId{e.kind, 0};
  }
  const std::string_view dma = engine_info(EngineKind::kDma).stream;
  if (name.size() > dma.size() && name.substr(0, dma.size()) == dma) {
    int q = 0;
    for (char c : name.substr(dma.size())) {
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

size_t Program::instruction_count(uint32_t pcore) const {
  size_t n = 0;
  for (const auto& s : streams) {
    if (s.id.pcore == pcore) n += s.instructions.size();
  }
  return n;
}

Stream& Program::stream(StreamId id) {
  for (auto& s : streams) {
    if (s.id == id) return s;
  }
  streams.push_back(Stream{id, {}});
  return streams.back();
}

}  // namespace neuronsim::device_model
