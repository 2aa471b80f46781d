#include "neuronsim/traces/summary.h"

#include <algorithm>
#include <map>
#include <set>

namespace neuronsim::traces {
namespace {

bool is_compute_engine(const std::string& n) {
  return n == "TensorE" || n == "VectorE" || n == "ScalarE" || n == "GpSimdE";
}
bool is_dma_queue(const std::string& n) {
  return n.rfind("DMA q", 0) == 0;
}

}  // namespace

sim::SimTime union_length(std::vector<std::pair<uint64_t, uint64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const auto& [b, e] : iv) {
    if (!open || b > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
      open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_b;
  return {total};
}

Summary summarize(const Trace& t) {
  Summary s;
  s.preset = t.metadata.value("preset", "");
  bool any = false;
  uint64_t lo = 0, hi = 0;
  // Per (process, engine): intervals and counts.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint64_t, uint64_t>>> iv;
  std::map<std::pair<std::string, std::string>, uint64_t> count;
  std::map<std::string, KernelSummary> kernels;
  std::set<std::string> active_cores;
  for (const SliceRecord& r : t.slices) {
    if (r.track >= t.tracks.size()) continue;
    const sim::TrackInfo& tr = t.tracks[r.track];
    if (!any || r.begin.ps < lo) lo = r.begin.ps;
    if (!any || r.end.ps > hi) hi = r.end.ps;
    any = true;
    if (tr.name == "Kernels") {
      KernelSummary& k = kernels[r.name];
      k.name = r.name;
      ++k.launches;
      k.total = k.total + (r.end - r.begin);
      continue;
    }
    const bool engine = is_compute_engine(tr.name), dma = is_dma_queue(tr.name);
    if (!engine && !dma) continue;
    active_cores.insert(tr.process);
    iv[{tr.process, tr.name}].push_back({r.begin.ps, r.end.ps});
    ++count[{tr.process, tr.name}];
    if (dma) {
      iv[{tr.process, "DMA (all queues)"}].push_back({r.begin.ps, r.end.ps});
      ++count[{tr.process, "DMA (all queues)"}];
      if (r.args.is_object()) {
        s.dma_bytes += r.args.value("bytes", 0.0);
        s.hbm_bytes += r.args.value("hbm_bytes", 0.0);
      }
    }
    if (r.args.is_object()) s.flops += r.args.value("flops", 0.0);
  }
  s.begin = {lo};
  s.end = {hi};
  const double span = static_cast<double>(hi - lo);
  for (auto& [key, intervals] : iv) {
    EngineSummary e;
    e.process = key.first;
    e.engine = key.second;
    e.instructions = count[key];
    e.busy = union_length(intervals);
    e.utilisation = span > 0 ? static_cast<double>(e.busy.ps) / span : 0;
    // The bottleneck is the busiest compute engine or a core's DMA queues taken together.
    if ((is_compute_engine(e.engine) || e.engine == "DMA (all queues)") &&
        e.utilisation > s.bottleneck_utilisation) {
      s.bottleneck_utilisation = e.utilisation;
      s.bottleneck = e.process + " " + e.engine;
    }
    s.engines.push_back(e);
  }
  for (auto& [name, k] : kernels) s.kernels.push_back(k);
  std::sort(s.kernels.begin(), s.kernels.end(),
            [](const KernelSummary& a, const KernelSummary& b) { return a.total > b.total; });
  const double seconds = span * 1e-12;
  if (seconds > 0) {
    s.achieved_flops_per_s = s.flops / seconds;
    s.achieved_hbm_bytes_per_s = s.hbm_bytes / seconds;
  }
  if (t.metadata.contains("peaks")) {
    const auto& p = t.metadata["peaks"];
    const double cores = std::max<double>(1, static_cast<double>(active_cores.size()));
    s.peak_flops_per_s = p.value("tensor_flops_per_core", 0.0) * cores;
    // Each core streams from the stack it is attached to; stacks shared by several active cores
    // count once.
    const double cores_per_stack =
        t.metadata.contains("config")
            ? std::max(1.0, t.metadata["config"].value("chip.cores", 1.0) /
                                t.metadata["config"].value("chip.hbm_stacks", 1.0))
            : 1.0;
    const double stacks = std::ceil(cores / cores_per_stack);
    s.peak_hbm_bytes_per_s = p.value("hbm_bytes_per_s_per_stack", 0.0) * stacks;
  }
  return s;
}

nlohmann::json Summary::to_json() const {
  nlohmann::json j;
  j["preset"] = preset;
  j["begin_ns"] = begin.ns();
  j["end_ns"] = end.ns();
  j["duration_ns"] = duration().ns();
  j["bottleneck"] = bottleneck;
  j["bottleneck_utilisation"] = bottleneck_utilisation;
  j["flops"] = flops;
  j["dma_bytes"] = dma_bytes;
  j["hbm_bytes"] = hbm_bytes;
  j["achieved_flops_per_s"] = achieved_flops_per_s;
  j["peak_flops_per_s"] = peak_flops_per_s;
  j["achieved_hbm_bytes_per_s"] = achieved_hbm_bytes_per_s;
  j["peak_hbm_bytes_per_s"] = peak_hbm_bytes_per_s;
  auto& es = j["engines"] = nlohmann::json::array();
  for (const auto& e : engines) {
    es.push_back({{"process", e.process},
                  {"engine", e.engine},
                  {"instructions", e.instructions},
                  {"busy_ns", e.busy.ns()},
                  {"utilisation", e.utilisation}});
  }
  auto& ks = j["kernels"] = nlohmann::json::array();
  for (const auto& k : kernels) {
    ks.push_back({{"name", k.name}, {"launches", k.launches}, {"total_ns", k.total.ns()}});
  }
  return j;
}

}  // namespace neuronsim::traces
