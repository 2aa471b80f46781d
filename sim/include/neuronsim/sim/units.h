#pragma once
// Strong types for simulated time and cycle counts. Cycles become time only at a clock boundary.
#include <cmath>
#include <compare>
#include <cstdint>

namespace neuronsim::sim {

/// A count of cycles of some clock domain.
struct Cycles {
  uint64_t count = 0;
  constexpr auto operator<=>(const Cycles&) const = default;
  constexpr Cycles operator+(Cycles o) const { return {count + o.count}; }
};

/// Simulated time in picoseconds (the SystemC time resolution neuronsim uses).
struct SimTime {
  uint64_t ps = 0;
  constexpr auto operator<=>(const SimTime&) const = default;
  constexpr SimTime operator+(SimTime o) const { return {ps + o.ps}; }
  constexpr SimTime operator-(SimTime o) const { return {ps - o.ps}; }
  constexpr double ns() const { return static_cast<double>(ps) * 1e-3; }
  constexpr double us() const { return static_cast<double>(ps) * 1e-6; }
  constexpr double seconds() const { return static_cast<double>(ps) * 1e-12; }
  static constexpr SimTime from_ns(double ns) {
    return {static_cast<uint64_t>(std::llround(ns * 1e3))};
  }
};

constexpr SimTime max(SimTime a, SimTime b) {
  return a < b ? b : a;
}
constexpr SimTime min(SimTime a, SimTime b) {
  return a < b ? a : b;
}

}  // namespace neuronsim::sim
