#include "neuronsim/sim/stats.h"

#include <stdexcept>

namespace neuronsim::sim {

StatsRegistry::Counter& StatsRegistry::counter(const std::string& path, const std::string& unit,
                                               const std::string& description) {
  auto it = entries_.find(path);
  if (it != entries_.end()) {
    if (!it->second.counter) throw std::logic_error("stat '" + path + "' is a formula");
    return *it->second.counter;
  }
  counters_.emplace_back();
  entries_.emplace(path, Entry{unit, description, &counters_.back(), {}});
  return counters_.back();
}

void StatsRegistry::formula(const std::string& path, const std::string& unit,
                            const std::string& description, std::function<double()> fn) {
  entries_[path] = Entry{unit, description, nullptr, std::move(fn)};
}

double StatsRegistry::value(const std::string& path) const {
  const Entry& e = entries_.at(path);
  return e.counter ? static_cast<double>(e.counter->value) : e.formula();
}

nlohmann::json StatsRegistry::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, e] : entries_) {
    nlohmann::json v;
    if (e.counter) {
      v["value"] = e.counter->value;
    } else {
      v["value"] = e.formula();
    }
    v["unit"] = e.unit;
    v["description"] = e.description;
    out[path] = std::move(v);
  }
  return out;
}

void StatsRegistry::reset() {
  for (auto& c : counters_) c.value = 0;
}

}  // namespace neuronsim::sim
