#include "neuronsim/device_model/interconnect/topology.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"

namespace neuronsim::device_model::interconnect {

namespace {
// Torus directions of a NeuronLink leaving a chip.
enum Dir : uint32_t { kColPlus, kColMinus, kRowPlus, kRowMinus };
constexpr uint32_t kDirs = 4;

// Steps along a ring of `n` from a to b, the shorter way (ties go the positive way): the sign
// gives the direction.
int ring_delta(uint32_t a, uint32_t b, uint32_t n) {
  const int forward = static_cast<int>((b + n - a) % n);
  const int backward = static_cast<int>(n) - forward;
  if (forward == 0) return 0;
  return forward <= backward ? forward : -backward;
}
}  // namespace

Topology::Topology(const InterconnectParams& params, std::vector<RankPlace> ranks)
    : params_(params), ranks_(std::move(ranks)) {
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> owner;
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    const RankPlace& p = ranks_[r];
    if (p.core >= params_.cores_per_instance()) {
      throw device_model::ConfigError(fmt::format(
          "rank {} is on NeuronCore {}, but a {} has {} logical NeuronCores (0-{})", r, p.core,
          params_.instance_name, params_.cores_per_instance(), params_.cores_per_instance() - 1));
    }
    auto [it, fresh] = owner.emplace(std::make_pair(p.instance, p.core), r);
    if (!fresh) {
      throw device_model::ConfigError(
          fmt::format("ranks {} and {} are both on NeuronCore {} of instance {}: each rank needs "
                      "its own NeuronCore",
                      it->second, r, p.core, p.instance));
    }
    if (std::find(instances_.begin(), instances_.end(), p.instance) == instances_.end()) {
      instances_.push_back(p.instance);
    }
  }
  const uint32_t n = size();
  bandwidth_.assign(2 * n, params_.dma_bytes_per_s);
  link_base_ = static_cast<uint32_t>(bandwidth_.size());
  bandwidth_.resize(bandwidth_.size() + instances_.size() * params_.chips * kDirs,
                    params_.link_bytes_per_s);
  nic_base_ = static_cast<uint32_t>(bandwidth_.size());
  bandwidth_.resize(bandwidth_.size() + instances_.size() * params_.chips * 2,
                    params_.network_bytes_per_s_per_chip());
}

uint32_t Topology::instance_index(uint32_t instance) const {
  return static_cast<uint32_t>(std::find(instances_.begin(), instances_.end(), instance) -
                               instances_.begin());
}

uint32_t Topology::link(uint32_t inst_index, uint32_t chip, uint32_t dir) const {
  return link_base_ + (inst_index * params_.chips + chip) * kDirs + dir;
}

uint32_t Topology::nic(uint32_t inst_index, uint32_t chip, bool out) const {
  return nic_base_ + (inst_index * params_.chips + chip) * 2 + (out ? 0 : 1);
}

Route Topology::route(uint32_t src, uint32_t dst) const {
  Route r;
  r.resources.push_back(2 * src);  // the sender's DMA reads and sends
  const RankPlace& a = ranks_.at(src);
  const RankPlace& b = ranks_.at(dst);
  const uint32_t ca = chip_of(src), cb = chip_of(dst);
  if (a.instance != b.instance) {
    r.crosses_network = true;
    r.resources.push_back(nic(instance_index(a.instance), ca, true));
    r.resources.push_back(nic(instance_index(b.instance), cb, false));
  } else if (ca != cb) {
    // Dimension-order routing: along the row's ring of columns first, then the column's ring.
    const uint32_t inst = instance_index(a.instance);
    uint32_t row = ca / params_.torus_cols, col = ca % params_.torus_cols;
    const uint32_t row_b = cb / params_.torus_cols, col_b = cb % params_.torus_cols;
    int dc = ring_delta(col, col_b, params_.torus_cols);
    while (dc != 0) {
      const bool plus = dc > 0;
      r.resources.push_back(
          link(inst, row * params_.torus_cols + col, plus ? kColPlus : kColMinus));
      col = (col + (plus ? 1 : params_.torus_cols - 1)) % params_.torus_cols;
      dc += plus ? -1 : 1;
      ++r.link_hops;
    }
    int dr = ring_delta(row, row_b, params_.torus_rows);
    while (dr != 0) {
      const bool plus = dr > 0;
      r.resources.push_back(
          link(inst, row * params_.torus_cols + col, plus ? kRowPlus : kRowMinus));
      row = (row + (plus ? 1 : params_.torus_rows - 1)) % params_.torus_rows;
      dr += plus ? -1 : 1;
      ++r.link_hops;
    }
  }
  r.resources.push_back(dma_in(dst));  // the receiver's DMA writes (and reduces)
  return r;
}

double Topology::latency_ns(const Route& r) const {
  double ns = params_.step_latency_ns;
  // The first hop is part of the step; further hops are routed through intermediate chips.
  if (r.link_hops > 1) ns += (r.link_hops - 1) * params_.link_hop_latency_ns;
  if (r.crosses_network) ns += params_.network_latency_ns;
  return ns;
}

uint32_t Topology::snake_position(uint32_t chip) const {
  const uint32_t row = chip / params_.torus_cols, col = chip % params_.torus_cols;
  return row * params_.torus_cols + (row % 2 == 0 ? col : params_.torus_cols - 1 - col);
}

std::vector<uint32_t> Topology::ring_order(const std::vector<uint32_t>& ranks) const {
  std::vector<uint32_t> out = ranks;
  std::stable_sort(out.begin(), out.end(), [&](uint32_t x, uint32_t y) {
    const RankPlace& a = ranks_.at(x);
    const RankPlace& b = ranks_.at(y);
    const auto key = [&](const RankPlace& p, uint32_t rank) {
      return std::make_tuple(instance_index(p.instance), snake_position(chip_of(rank)), p.core);
    };
    return key(a, x) < key(b, y);
  });
  return out;
}

}  // namespace neuronsim::device_model::interconnect
