#include "semaphore_bank.h"

#include "neuronsim/sim/simulation.h"

namespace neuronsim::device {

SemaphoreBank::SemaphoreBank(sc_core::sc_module_name name, uint32_t count)
    : sc_module(name), values_(count, 0) {
  for (uint32_t i = 0; i < count; ++i) changed_.push_back(std::make_unique<sc_core::sc_event>());
  SC_METHOD(apply_due);
  sensitive << tick_;
  dont_initialize();
}

void SemaphoreBank::reset() {
  std::fill(values_.begin(), values_.end(), 0);
  pending_ = {};
  tick_.cancel();
}

void SemaphoreBank::wait_at_least(uint32_t sem, int64_t target, const bool& abort) {
  while (!abort && values_[sem] < target) sc_core::wait(*changed_[sem]);
}

void SemaphoreBank::signal_at(uint32_t sem, int64_t delta, sim::SimTime when) {
  const sim::SimTime now = sim::Simulation::now();
  if (when <= now) {
    values_[sem] += delta;
    changed_[sem]->notify(sc_core::SC_ZERO_TIME);
    return;
  }
  pending_.push({when.ps, seq_++, sem, delta});
  arm();
}

void SemaphoreBank::wake_all() {
  for (auto& e : changed_) e->notify(sc_core::SC_ZERO_TIME);
}

void SemaphoreBank::apply_due() {
  const uint64_t now = sim::Simulation::now().ps;
  while (!pending_.empty() && pending_.top().when_ps <= now) {
    const Pending p = pending_.top();
    pending_.pop();
    values_[p.sem] += p.delta;
    changed_[p.sem]->notify(sc_core::SC_ZERO_TIME);
  }
  arm();
}

void SemaphoreBank::arm() {
  if (pending_.empty()) return;
  const uint64_t now = sim::Simulation::now().ps;
  const uint64_t when = pending_.top().when_ps;
  // notify() keeps the earliest of several pending notifications.
  tick_.notify(sc_core::sc_time::from_value(when > now ? when - now : 0));
}

}  // namespace neuronsim::device
