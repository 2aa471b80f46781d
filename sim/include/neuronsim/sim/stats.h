#pragma once
// A registry of named statistics with units. Counters are plain integers (free when unused);
// derived values are formulas evaluated at dump time. Output is JSON.
#include <deque>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace neuronsim::sim {

class StatsRegistry {
 public:
  struct Counter {
    uint64_t value = 0;
    void add(uint64_t v) { value += v; }
  };

  /// Returns the counter at `path` ("nc0.tensor.instructions"), creating it on first use.
  Counter& counter(const std::string& path, const std::string& unit,
                   const std::string& description);
  /// Registers a derived value computed when the stats are read.
  void formula(const std::string& path, const std::string& unit, const std::string& description,
               std::function<double()> fn);

  /// Current value of a counter or formula; throws std::out_of_range for an unknown path.
  double value(const std::string& path) const;
  /// {"path": {"value": v, "unit": u, "description": d}, ...}, sorted by path.
  nlohmann::json to_json() const;
  /// Zeroes every counter (formulas follow).
  void reset();

 private:
  struct Entry {
    std::string unit;
    std::string description;
    Counter* counter = nullptr;
    std::function<double()> formula;
  };
  std::deque<Counter> counters_;
  std::map<std::string, Entry> entries_;
};

}  // namespace neuronsim::sim
