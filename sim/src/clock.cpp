#include "neuronsim/sim/clock.h"

#include <cmath>

namespace neuronsim::sim {

ClockDomain::ClockDomain(std::string name, double frequency_hz)
    : name_(std::move(name)), frequency_hz_(frequency_hz) {}

SimTime ClockDomain::to_time(Cycles c) const {
  return to_time(static_cast<double>(c.count));
}

SimTime ClockDomain::to_time(double cycles) const {
  return {static_cast<uint64_t>(std::llround(cycles * 1e12 / frequency_hz_))};
}

double ClockDomain::to_cycles(SimTime t) const {
  return static_cast<double>(t.ps) * frequency_hz_ * 1e-12;
}

}  // namespace neuronsim::sim
