#include "dma_fabric.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {

DmaFabric::DmaFabric(sc_core::sc_module_name name, uint32_t cores, double core_pool_bytes_per_s,
                     uint32_t stacks, double stack_bytes_per_s)
    : sc_module(name),
      core_pool_bw_(core_pool_bytes_per_s),
      stack_bw_(stack_bytes_per_s),
      cores_(cores),
      stacks_(stacks) {
  SC_METHOD(on_tick);
  sensitive << tick_;
  dont_initialize();
}

void DmaFabric::attach_trace(sim::TraceSink* sink) {
  sink_ = sink;
  hbm_tracks_.clear();
  last_emitted_.assign(stacks_, -1.0);
  if (!sink_ || !sink_->enabled()) return;
  for (uint32_t s = 0; s < stacks_; ++s) {
    hbm_tracks_.push_back(sink_->add_track({"HBM", fmt::format("HBM stack {} bandwidth (GB/s)", s),
                                            sim::TrackKind::kCounter, static_cast<int>(s)}));
  }
}

void DmaFabric::transfer(const Transfer& t) {
  if (t.bytes <= 0) return;
  Flow f;
  f.t = t;
  f.remaining = t.bytes;
  advance();
  flows_.push_back(&f);
  reallocate();
  schedule();
  while (!f.finished) sc_core::wait(f.done);
}

void DmaFabric::advance() {
  const uint64_t now = sim::Simulation::now().ps;
  const double dt = static_cast<double>(now - last_ps_) * 1e-12;
  for (Flow* f : flows_) f->remaining -= f->rate * dt;
  last_ps_ = now;
}

// Progressive filling: raise every unfrozen flow's rate equally until a flow reaches its cap or a
// shared resource (core pool, HBM stack) saturates; freeze those flows; repeat.
void DmaFabric::reallocate() {
  const size_t n = flows_.size();
  std::vector<bool> frozen(n, false);
  for (Flow* f : flows_) f->rate = 0;
  std::vector<double> pool_used(cores_, 0.0), stack_used(stacks_, 0.0);
  size_t active = n;
  while (active > 0) {
    std::vector<double> pool_w(cores_, 0.0), stack_w(stacks_, 0.0);
    double inc = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      const Flow& f = *flows_[i];
      inc = std::min(inc, f.t.cap_bytes_per_s - f.rate);
      pool_w[f.t.core] += 1.0;
      stack_w[f.t.stack] += f.t.hbm_bytes / f.t.bytes;
    }
    for (uint32_t c = 0; c < cores_; ++c) {
      if (pool_w[c] > 0) inc = std::min(inc, (core_pool_bw_ - pool_used[c]) / pool_w[c]);
    }
    for (uint32_t s = 0; s < stacks_; ++s) {
      if (stack_w[s] > 0) inc = std::min(inc, (stack_bw_ - stack_used[s]) / stack_w[s]);
    }
    inc = std::max(inc, 0.0);
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      Flow& f = *flows_[i];
      f.rate += inc;
      pool_used[f.t.core] += inc;
      stack_used[f.t.stack] += inc * f.t.hbm_bytes / f.t.bytes;
    }
    const double eps = 1e-9;
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      const Flow& f = *flows_[i];
      const bool capped = f.rate >= f.t.cap_bytes_per_s * (1 - eps);
      const bool pool_full = pool_used[f.t.core] >= core_pool_bw_ * (1 - eps);
      const bool stack_full = f.t.hbm_bytes > 0 && stack_used[f.t.stack] >= stack_bw_ * (1 - eps);
      if (capped || pool_full || stack_full) {
        frozen[i] = true;
        --active;
      }
    }
  }
  emit_counters();
}

void DmaFabric::emit_counters() {
  if (hbm_tracks_.empty()) return;
  used_.assign(stacks_, 0.0);
  for (const Flow* f : flows_) used_[f->t.stack] += f->rate * f->t.hbm_bytes / f->t.bytes;
  for (uint32_t s = 0; s < stacks_; ++s) {
    const double gbps = used_[s] * 1e-9;
    if (gbps != last_emitted_[s]) {
      sink_->counter(hbm_tracks_[s], sim::Simulation::now(), gbps);
      last_emitted_[s] = gbps;
    }
  }
}

void DmaFabric::schedule() {
  double soonest = std::numeric_limits<double>::infinity();
  for (const Flow* f : flows_) {
    if (f->rate > 0) soonest = std::min(soonest, std::max(f->remaining, 0.0) / f->rate);
  }
  tick_.cancel();
  if (std::isfinite(soonest)) {
    tick_.notify(sc_core::sc_time::from_value(static_cast<uint64_t>(std::ceil(soonest * 1e12))));
  }
}

void DmaFabric::on_tick() {
  advance();
  // A flow is done when less than what it moves in one picosecond remains.
  bool any = false;
  for (auto it = flows_.begin(); it != flows_.end();) {
    Flow* f = *it;
    if (f->remaining <= f->rate * 1e-12 + 1e-6) {
      f->finished = true;
      f->done.notify(sc_core::SC_ZERO_TIME);
      it = flows_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  if (any) reallocate();
  schedule();
}

}  // namespace neuronsim::device_model
