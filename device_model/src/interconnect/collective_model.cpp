#include "neuronsim/device_model/interconnect/collective_model.h"

#include <algorithm>
#include <numeric>

namespace neuronsim::device_model::interconnect {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "all_reduce";
    case Kind::kAllGather:
      return "all_gather";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kAllToAll:
      return "all_to_all";
    case Kind::kBroadcast:
      return "broadcast";
    case Kind::kReduce:
      return "reduce";
    case Kind::kGather:
      return "gather";
    case Kind::kScatter:
      return "scatter";
    case Kind::kBarrier:
      return "barrier";
    case Kind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

namespace {

// Ring reduce-scatter or all-gather over `ring` (group ranks in ring order): size-1 steps in
// which every rank passes one chunk to the next.
std::vector<Step> ring_pass(const std::vector<uint32_t>& ring, double chunk, bool reduce) {
  const size_t n = ring.size();
  std::vector<Step> steps(n > 1 ? n - 1 : 0);
  for (auto& s : steps) {
    for (size_t i = 0; i < n; ++i) s.push_back({ring[i], ring[(i + 1) % n], chunk, reduce});
  }
  return steps;
}

// Every rank of `ranks` sends `chunk` to every other in one step.
Step mesh_exchange(const std::vector<uint32_t>& ranks, double chunk, bool reduce) {
  Step s;
  for (uint32_t a : ranks) {
    for (uint32_t b : ranks) {
      if (a != b) s.push_back({a, b, chunk, reduce});
    }
  }
  return s;
}

// Runs schedules side by side (rings of different instances at once): step i of the result
// holds step i of each.
std::vector<Step> side_by_side(const std::vector<std::vector<Step>>& parts) {
  size_t len = 0;
  for (const auto& p : parts) len = std::max(len, p.size());
  std::vector<Step> out(len);
  for (const auto& p : parts) {
    for (size_t i = 0; i < p.size(); ++i) out[i].insert(out[i].end(), p[i].begin(), p[i].end());
  }
  return out;
}

void append(std::vector<Step>& a, const std::vector<Step>& b) {
  a.insert(a.end(), b.begin(), b.end());
}

}  // namespace

CollectiveModel::CollectiveModel(Topology topology) : topology_(std::move(topology)) {
  std::vector<uint32_t> all(topology_.size());
  std::iota(all.begin(), all.end(), 0);
  ring_ = topology_.ring_order(all);
}

bool CollectiveModel::symmetric_instances() const {
  const auto& inst = topology_.instances();
  if (inst.size() < 2) return false;
  std::vector<uint32_t> per(inst.size(), 0);
  for (uint32_t r = 0; r < topology_.size(); ++r) {
    per[std::find(inst.begin(), inst.end(), topology_.place(r).instance) - inst.begin()]++;
  }
  return std::all_of(per.begin(), per.end(), [&](uint32_t c) { return c == per[0]; });
}

std::string Plan::name() const {
  return std::string(hierarchical ? "hierarchical " : "") + algorithm_name(algorithm);
}

Plan CollectiveModel::choose(const CollectiveDesc& d) const {
  const InterconnectParams& p = topology_.params();
  Plan plan;
  plan.hierarchical = p.inter_instance == InterInstance::kHierarchical && symmetric_instances() &&
                      d.kind != Kind::kSendRecv;
  if (d.kind == Kind::kSendRecv) {
    plan.algorithm = Algorithm::kMesh;  // one transfer, whatever the setting
  } else if (p.algorithm != Algorithm::kAuto) {
    plan.algorithm = p.algorithm;
  } else {
    plan.algorithm = d.bytes < p.mesh_max_bytes ? Algorithm::kMesh : Algorithm::kRing;
  }
  return plan;
}

std::vector<Step> CollectiveModel::schedule(const CollectiveDesc& d, const Plan& plan) const {
  if (plan.hierarchical && symmetric_instances()) return hierarchical(d, plan.algorithm);
  return flat(d, plan.algorithm);
}

std::vector<Step> CollectiveModel::hierarchical(const CollectiveDesc& d, Algorithm a) const {
  // Y ranks per instance (their ring order inside the instance), X instances.
  std::vector<std::vector<uint32_t>> local;  // per instance, ring order
  for (uint32_t inst : topology_.instances()) {
    std::vector<uint32_t> members;
    for (uint32_t r : ring_) {
      if (topology_.place(r).instance == inst) members.push_back(r);
    }
    local.push_back(members);
  }
  const size_t x = local.size(), y = local[0].size();
  std::vector<std::vector<uint32_t>> across(y);  // per local index, one rank per instance
  for (size_t i = 0; i < y; ++i) {
    for (size_t k = 0; k < x; ++k) across[i].push_back(local[k][i]);
  }
  const double n = static_cast<double>(topology_.size());
  const double bytes = static_cast<double>(d.bytes);
  auto intra = [&](double chunk, bool reduce) {
    std::vector<std::vector<Step>> parts;
    for (const auto& l : local) {
      parts.push_back(a == Algorithm::kMesh ? std::vector<Step>{mesh_exchange(l, chunk, reduce)}
                                            : ring_pass(l, chunk, reduce));
    }
    return side_by_side(parts);
  };
  auto inter = [&](double chunk, bool reduce) {
    std::vector<std::vector<Step>> parts;
    for (const auto& a : across) parts.push_back(ring_pass(a, chunk, reduce));
    return side_by_side(parts);
  };
  std::vector<Step> s;
  switch (d.kind) {
    case Kind::kAllReduce:
    case Kind::kBarrier:
      // Intra-instance reduce-scatter, all-reduce of the 1/Y shards between instances, then
      // intra-instance all-gather.
      append(s, intra(bytes / y, true));
      append(s, inter(bytes / n, true));
      append(s, inter(bytes / n, false));
      append(s, intra(bytes / y, false));
      return s;
    case Kind::kAllGather:
      // Between instances first: it moves the fewer bytes (internode doc).
      append(s, inter(bytes / n, false));
      append(s, intra(bytes / y, false));
      return s;
    case Kind::kReduceScatter:
      append(s, intra(bytes / y, true));
      append(s, inter(bytes / n, true));
      return s;
    default:
      return flat(d, a);
  }
}

std::vector<Step> CollectiveModel::flat(const CollectiveDesc& d, Algorithm a) const {
  const uint32_t n = topology_.size();
  if (n < 2) return {};
  const double bytes = static_cast<double>(d.bytes);
  const double chunk = bytes / n;
  const bool ring = a == Algorithm::kRing;
  std::vector<uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::vector<Step> s;
  switch (d.kind) {
    case Kind::kAllReduce:
    case Kind::kBarrier:
      if (ring) {
        append(s, ring_pass(ring_, chunk, true));
        append(s, ring_pass(ring_, chunk, false));
      } else {
        s.push_back(mesh_exchange(all, chunk, true));
        s.push_back(mesh_exchange(all, chunk, false));
      }
      return s;
    case Kind::kAllGather:
      if (ring) return ring_pass(ring_, chunk, false);
      return {mesh_exchange(all, chunk, false)};
    case Kind::kReduceScatter:
      if (ring) return ring_pass(ring_, chunk, true);
      return {mesh_exchange(all, chunk, true)};
    case Kind::kAllToAll: {
      // Pairwise exchange (ring: in step k rank i sends to i + k) or all at once (mesh).
      auto pair_bytes = [&](uint32_t i, uint32_t j) {
        return d.matrix.empty() ? chunk : static_cast<double>(d.matrix.at(i * n + j));
      };
      if (!ring) {
        Step one;
        for (uint32_t i = 0; i < n; ++i) {
          for (uint32_t j = 0; j < n; ++j) {
            if (i != j) one.push_back({i, j, pair_bytes(i, j), false});
          }
        }
        return {one};
      }
      for (uint32_t k = 1; k < n; ++k) {
        Step st;
        for (uint32_t i = 0; i < n; ++i)
          st.push_back({i, (i + k) % n, pair_bytes(i, (i + k) % n), false});
        s.push_back(st);
      }
      return s;
    }
    case Kind::kBroadcast: {
      // Scatter from the root, then all-gather (large-message broadcast); mesh: root to all.
      Step scatter;
      for (uint32_t j = 0; j < n; ++j) {
        if (j != d.root) scatter.push_back({d.root, j, ring ? chunk : bytes, false});
      }
      s.push_back(scatter);
      if (ring) append(s, ring_pass(ring_, chunk, false));
      return s;
    }
    case Kind::kReduce: {
      // Reduce-scatter, then gather to the root; mesh: all to the root, reduced there.
      if (ring) append(s, ring_pass(ring_, chunk, true));
      Step gather;
      for (uint32_t j = 0; j < n; ++j) {
        if (j != d.root) gather.push_back({j, d.root, ring ? chunk : bytes, !ring});
      }
      s.push_back(gather);
      return s;
    }
    case Kind::kGather:
    case Kind::kScatter: {
      Step one;
      for (uint32_t j = 0; j < n; ++j) {
        if (j == d.root) continue;
        if (d.kind == Kind::kGather) {
          one.push_back({j, d.root, chunk, false});
        } else {
          one.push_back({d.root, j, chunk, false});
        }
      }
      return {one};
    }
    case Kind::kSendRecv:
      return {Step{{d.root, d.peer, bytes, false}}};
  }
  return s;
}

sim::SimTime CollectiveModel::step_time(const Step& s) const {
  const auto& bw = topology_.bandwidth();
  std::vector<double> load(bw.size(), 0.0);
  double latency = 0;
  const double reduce_weight = 1.0 / topology_.params().reduce_throughput_factor;
  for (const Transfer& t : s) {
    const Route r = topology_.route(t.src, t.dst);
    latency = std::max(latency, topology_.latency_ns(r));
    for (uint32_t res : r.resources) {
      load[res] += t.bytes * (t.reduce && res == topology_.dma_in(t.dst) ? reduce_weight : 1.0);
    }
  }
  double transfer_s = 0;
  for (size_t i = 0; i < load.size(); ++i) transfer_s = std::max(transfer_s, load[i] / bw[i]);
  return sim::SimTime::from_ns(latency + transfer_s * 1e9);
}

CollectiveCost CollectiveModel::cost(const CollectiveDesc& d) {
  const bool cacheable = d.matrix.empty();
  const auto key = std::make_tuple(static_cast<int>(d.kind), d.bytes, d.root, d.peer);
  if (cacheable) {
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  CollectiveCost c;
  c.plan = choose(d);
  const std::vector<Step> steps = schedule(d, c.plan);
  sim::SimTime total = sim::SimTime::from_ns(topology_.params().launch_overhead_ns);
  for (const Step& s : steps) total = total + step_time(s);
  c.duration = total;
  c.steps = static_cast<uint32_t>(steps.size());
  if (cacheable) cache_[key] = c;
  return c;
}

}  // namespace neuronsim::device_model::interconnect
