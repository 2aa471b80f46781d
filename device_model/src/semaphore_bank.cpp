#include "semaphore_bank.h"

#include <algorithm>

#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {

SemaphoreBank::SemaphoreBank(sc_core::sc_module_name name, uint32_t count)
    : sc_module(name), values_(count, 0), history_(count) {
  for (uint32_t i = 0; i < count; ++i) changed_.push_back(std::make_unique<sc_core::sc_event>());
  SC_METHOD(apply_due);
  sensitive << tick_;
  dont_initialize();
}

void SemaphoreBank::reset() {
  // Only semaphores the last program changed (a few of the bank's) have anything to clear.
  for (uint32_t sem : touched_) {
    values_[sem] = 0;
    history_[sem].clear();
  }
  touched_.clear();
  pending_ = {};
  tick_.cancel();
}

void SemaphoreBank::wait_at_least(uint32_t sem, int64_t target, const bool& abort) {
  while (!abort && values_[sem] < target) sc_core::wait(*changed_[sem]);
}

void SemaphoreBank::signal_at(uint32_t sem, int64_t delta, sim::SimTime when) {
  const sim::SimTime now = sim::Simulation::now();
  if (when <= now) {
    add(sem, delta, now.ps);
    return;
  }
  pending_.push({when.ps, seq_++, sem, delta});
  arm();
}

void SemaphoreBank::add(uint32_t sem, int64_t delta, uint64_t now_ps) {
  if (history_[sem].empty()) touched_.push_back(sem);
  values_[sem] += delta;
  history_[sem].emplace_back(values_[sem], now_ps);
  changed_[sem]->notify(sc_core::SC_ZERO_TIME);
}

sim::SimTime SemaphoreBank::reached_at(uint32_t sem, int64_t target) const {
  const auto& h = history_[sem];
  const auto it = std::lower_bound(h.begin(), h.end(), target,
                                   [](const auto& e, int64_t v) { return e.first < v; });
  return it == h.end() ? sim::Simulation::now() : sim::SimTime{it->second};
}

void SemaphoreBank::wake_all() {
  for (auto& e : changed_) e->notify(sc_core::SC_ZERO_TIME);
}

void SemaphoreBank::apply_due() {
  const uint64_t now = sim::Simulation::now().ps;
  while (!pending_.empty() && pending_.top().when_ps <= now) {
    const Pending p = pending_.top();
    pending_.pop();
    add(p.sem, p.delta, now);
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

}  // namespace neuronsim::device_model
