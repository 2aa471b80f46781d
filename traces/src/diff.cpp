#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/traces/summary.h"

namespace neuronsim::traces {
namespace {

std::string ratio(double a, double b) {
  return a > 0 ? fmt::format("{:.3f}x", b / a) : "-";
}

// A summary's entries by key ("nc0 TensorE" for engines, the name for ops).
std::map<std::string, const nlohmann::json*> by_key(const nlohmann::json& list, bool engine_key) {
  std::map<std::string, const nlohmann::json*> out;
  for (const auto& e : list) {
    const std::string key =
        engine_key ? e.value("process", "") + " " + e.value("engine", "") : e.value("name", "");
    out[key] = &e;
  }
  return out;
}

// A summary's list (engines, ops), or an empty one.
const nlohmann::json& list_of(const nlohmann::json& s, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  return s.contains(key) && s[key].is_array() ? s[key] : empty;
}

double value_of(const nlohmann::json* e, const char* key) {
  return e && e->contains(key) && (*e)[key].is_number() ? (*e)[key].get<double>() : 0.0;
}

nlohmann::json run_of(const nlohmann::json& s) {
  nlohmann::json r;
  for (const char* k : {"preset", "overrides", "device_time_ns", "host_time_ns", "bottleneck"}) {
    r[k] = s.contains(k) ? s[k] : nlohmann::json(nullptr);
  }
  return r;
}

nlohmann::json ratio_json(double a, double b) {
  return a > 0 ? nlohmann::json(b / a) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json diff_json(const nlohmann::json& a, const nlohmann::json& b) {
  const auto ea = by_key(list_of(a, "engines"), true);
  const auto eb = by_key(list_of(b, "engines"), true);
  std::vector<std::string> engines;
  for (const auto* m : {&ea, &eb}) {
    for (const auto& [k, e] : *m) {
      if (std::find(engines.begin(), engines.end(), k) == engines.end()) engines.push_back(k);
    }
  }
  std::sort(engines.begin(), engines.end());
  sort_engine_labels(engines);
  nlohmann::json engine_rows = nlohmann::json::array();
  for (const std::string& k : engines) {
    const auto* x = ea.count(k) ? ea.at(k) : nullptr;
    const auto* y = eb.count(k) ? eb.at(k) : nullptr;
    engine_rows.push_back({{"engine", k},
                           {"busy_ns_a", value_of(x, "busy_ns")},
                           {"busy_ns_b", value_of(y, "busy_ns")},
                           {"utilisation_a", value_of(x, "utilisation")},
                           {"utilisation_b", value_of(y, "utilisation")}});
  }
  const auto oa = by_key(list_of(a, "ops"), false);
  const auto ob = by_key(list_of(b, "ops"), false);
  std::vector<nlohmann::json> op_rows;
  std::set<std::string> names;
  for (const auto* m : {&oa, &ob}) {
    for (const auto& [k, o] : *m) names.insert(k);
  }
  for (const std::string& n : names) {
    const auto* x = oa.count(n) ? oa.at(n) : nullptr;
    const auto* y = ob.count(n) ? ob.at(n) : nullptr;
    const double ta = value_of(x, "total_ns"), tb = value_of(y, "total_ns");
    op_rows.push_back({{"op", n},
                       {"count_a", x ? x->value("count", 0) : 0},
                       {"count_b", y ? y->value("count", 0) : 0},
                       {"time_ns_a", ta},
                       {"time_ns_b", tb},
                       {"delta_ns", tb - ta},
                       {"ratio", ratio_json(ta, tb)}});
  }
  std::stable_sort(op_rows.begin(), op_rows.end(), [](const auto& x, const auto& y) {
    const double dx = std::fabs(x["delta_ns"].template get<double>());
    const double dy = std::fabs(y["delta_ns"].template get<double>());
    return dx != dy ? dx > dy : x["op"] < y["op"];
  });
  const double ta = value_of(&a, "device_time_ns"), tb = value_of(&b, "device_time_ns");
  nlohmann::json j;
  j["a"] = run_of(a);
  j["b"] = run_of(b);
  j["device_time_delta_ns"] = tb - ta;
  j["device_time_ratio"] = ratio_json(ta, tb);
  j["engines"] = engine_rows;
  j["ops"] = op_rows;
  return j;
}

std::string format_diff(const Summary& a, const Summary& b, const std::string& na,
                        const std::string& nb) {
  std::string out;
  out += fmt::format("A = {}\nB = {}\n\n", na, nb);
  out += fmt::format("{:<26} {:>14} {:>14} {:>10}\n", "", "A", "B", "B/A");
  auto row = [&](const std::string& what, double x, double y, const std::string& unit) {
    out += fmt::format("{:<26} {:>12.3f}{:<2} {:>12.3f}{:<2} {:>10}\n", what, x, unit, y, unit,
                       ratio(x, y));
  };
  row("simulated time (us)", a.duration().us(), b.duration().us(), "");
  row("TensorE TFLOP/s", a.achieved_flops_per_s * 1e-12, b.achieved_flops_per_s * 1e-12, "");
  row("HBM GB/s", a.achieved_hbm_bytes_per_s * 1e-9, b.achieved_hbm_bytes_per_s * 1e-9, "");
  row("DMA MiB", a.dma_bytes / (1 << 20), b.dma_bytes / (1 << 20), "");
  out += fmt::format("bottleneck: A {} ({:.1f}%), B {} ({:.1f}%)\n", a.bottleneck,
                     100 * a.bottleneck_utilisation, b.bottleneck, 100 * b.bottleneck_utilisation);

  out += fmt::format("\n{:<26} {:>12} {:>12} {:>10} {:>8} {:>8}\n", "engine busy (us)", "A", "B",
                     "B/A", "util A", "util B");
  std::map<std::string, std::pair<const EngineSummary*, const EngineSummary*>> engines;
  for (const auto& e : a.engines) engines[e.process + " " + e.engine].first = &e;
  for (const auto& e : b.engines) engines[e.process + " " + e.engine].second = &e;
  for (const auto& [name, p] : engines) {
    const double x = p.first ? p.first->busy.us() : 0, y = p.second ? p.second->busy.us() : 0;
    out += fmt::format("{:<26} {:>12.3f} {:>12.3f} {:>10} {:>7.1f}% {:>7.1f}%\n", name, x, y,
                       ratio(x, y), p.first ? 100 * p.first->utilisation : 0.0,
                       p.second ? 100 * p.second->utilisation : 0.0);
  }
  std::map<std::string, std::pair<const KernelSummary*, const KernelSummary*>> kernels;
  for (const auto& k : a.kernels) kernels[k.name].first = &k;
  for (const auto& k : b.kernels) kernels[k.name].second = &k;
  if (!kernels.empty()) {
    out += fmt::format("\n{:<40} {:>12} {:>12} {:>10}\n", "kernel total (us)", "A", "B", "B/A");
    for (const auto& [name, p] : kernels) {
      const double x = p.first ? p.first->total.us() : 0, y = p.second ? p.second->total.us() : 0;
      out += fmt::format("{:<40} {:>12.3f} {:>12.3f} {:>10}\n", name, x, y, ratio(x, y));
    }
  }
  return out;
}

}  // namespace neuronsim::traces
