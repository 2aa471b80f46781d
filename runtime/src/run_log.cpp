#include "neuronsim/runtime/run_log.h"

#include <cstring>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include "neuronsim/device_model/program_json.h"

namespace neuronsim::runtime {
namespace {

static_assert(std::is_trivially_copyable_v<device_model::Instruction>,
              "programs are compared and hashed by their instructions' bytes");

uint64_t fnv(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

uint64_t content_hash(const device_model::Program& p) {
  uint64_t h = fnv(0xcbf29ce484222325ULL, p.name.data(), p.name.size());
  h = fnv(h, &p.grid, sizeof p.grid);
  for (const device_model::Stream& s : p.streams) {
    const std::string id = s.id.name();
    h = fnv(h, id.data(), id.size());
    h = fnv(h, s.instructions.data(), s.instructions.size() * sizeof(device_model::Instruction));
  }
  return h;
}

bool same_program(const device_model::Program& a, const device_model::Program& b) {
  if (a.name != b.name || a.grid != b.grid || a.streams.size() != b.streams.size()) return false;
  for (size_t i = 0; i < a.streams.size(); ++i) {
    const auto& x = a.streams[i];
    const auto& y = b.streams[i];
    if (!(x.id == y.id) || x.instructions.size() != y.instructions.size()) return false;
    if (std::memcmp(x.instructions.data(), y.instructions.data(),
                    x.instructions.size() * sizeof(device_model::Instruction)) != 0) {
      return false;
    }
  }
  return true;
}

// Entries as JSON arrays: [kind, dev, stream, a, b, flag, flag2].
nlohmann::json entry_json(const RunLog::Entry& e) {
  return nlohmann::json::array({static_cast<int>(e.kind), e.dev, e.stream, e.a, e.b,
                                static_cast<int>(e.flag), static_cast<int>(e.flag2)});
}

}  // namespace

RunLog::RunLog(nlohmann::json config) : config_(std::move(config)) {}

void RunLog::launch(uint32_t dev, int64_t stream, const device_model::Program& program) {
  const uint64_t h = content_hash(program);
  size_t index = programs_.size();
  for (size_t i : by_hash_[h]) {
    if (same_program(programs_[i], program)) index = i;
  }
  if (index == programs_.size()) {
    programs_.push_back(program);
    by_hash_[h].push_back(index);
  }
  ++launches_;
  add({Kind::kLaunch, dev, stream, index});
}

uint64_t RunLog::event_id(const Event& e) {
  auto [it, added] = events_.try_emplace(&e, events_.size());
  return it->second;
}

void RunLog::unreplayable(const std::string& why) {
  if (why_not_.empty()) why_not_ = why;
}

nlohmann::json RunLog::to_json() const {
  nlohmann::json programs = nlohmann::json::array();
  for (const auto& p : programs_) programs.push_back(device_model::program_to_json(p));
  nlohmann::json entries = nlohmann::json::array();
  for (const Entry& e : entries_) entries.push_back(entry_json(e));
  return {{"format", kRunLogFormat},      {"config", config_},
          {"replayable", replayable()},   {"why_not", why_not_},
          {"launches", launches_},        {"programs", std::move(programs)},
          {"entries", std::move(entries)}};
}

RunLog RunLog::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || j.value("format", "") != kRunLogFormat) {
    throw std::runtime_error(
        fmt::format("{}: not a neuronsim run log ({} expected)", origin, kRunLogFormat));
  }
  RunLog log(j.value("config", nlohmann::json::object()));
  log.why_not_ = j.value("why_not", std::string());
  log.launches_ = j.value("launches", size_t{0});
  try {
    for (const auto& p : j.at("programs"))
      log.programs_.push_back(device_model::program_from_json(p));
    for (const auto& e : j.at("entries")) {
      Entry x;
      x.kind = static_cast<Kind>(e.at(0).get<int>());
      x.dev = e.at(1).get<uint32_t>();
      x.stream = e.at(2).get<int64_t>();
      x.a = e.at(3).get<uint64_t>();
      x.b = e.at(4).get<uint64_t>();
      x.flag = e.at(5).get<int>() != 0;
      x.flag2 = e.at(6).get<int>() != 0;
      if (x.kind > Kind::kNewStream) throw std::runtime_error("unknown entry kind");
      if (x.kind == Kind::kLaunch && x.a >= log.programs_.size()) {
        throw std::runtime_error("a launch names a program the log does not hold");
      }
      log.entries_.push_back(x);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: a damaged run log ({})", origin, e.what()));
  }
  return log;
}

}  // namespace neuronsim::runtime
