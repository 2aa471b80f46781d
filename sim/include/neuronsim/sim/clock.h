#pragma once
// A clock domain converts an engine's cycle counts to simulated time.
#include <string>

#include "neuronsim/sim/units.h"

namespace neuronsim::sim {

class ClockDomain {
 public:
  ClockDomain() = default;
  ClockDomain(std::string name, double frequency_hz);

  const std::string& name() const { return name_; }
  double frequency_hz() const { return frequency_hz_; }

  /// Time taken by `c` cycles, rounded to the nearest picosecond.
  SimTime to_time(Cycles c) const;
  /// Fractional cycle counts (cost models that average) round the same way.
  SimTime to_time(double cycles) const;
  /// Cycles elapsed in `t`, as a real number (for reports).
  double to_cycles(SimTime t) const;

 private:
  std::string name_;
  double frequency_hz_ = 1e9;
};

}  // namespace neuronsim::sim
