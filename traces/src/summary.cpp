#include "neuronsim/traces/summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "neuronsim/device_model/engines.h"
#include "neuronsim/traces/trace_reader.h"

namespace neuronsim::traces {
namespace {

using device_model::kAllDmaRow;
using device_model::kDmaQueueRowPrefix;
using device_model::kEngines;
const std::string kAllDma(kAllDmaRow);

// A row of one physical core of a logical core of several (trn2 LNC=2) is named
// "pcore<p> <row>" (device.h, Note [LNC launch]): {"pcore<p>", "<row>"}; else {"", name}.
std::pair<std::string, std::string> split_pcore(const std::string& n) {
  if (n.rfind("pcore", 0) != 0) return {"", n};
  size_t i = 5;
  while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
  if (i == 5 || i >= n.size() || n[i] != ' ') return {"", n};
  return {n.substr(0, i), n.substr(i + 1)};
}
std::string base_row(const std::string& n) {
  return split_pcore(n).second;
}

bool is_compute_engine(const std::string& row) {
  return device_model::compute_engine_of_row(base_row(row)) != nullptr;
}
bool is_dma_queue(const std::string& row) {
  return base_row(row).rfind(kDmaQueueRowPrefix, 0) == 0;
}
// A unit's row beside its engine's (TensorE's LoadStationary).
bool is_unit_row(const std::string& row) {
  const std::string n = base_row(row);
  return std::any_of(kEngines.begin(), kEngines.end(), [&](const device_model::EngineInfo& e) {
    return !e.unit_row.empty() && e.unit_row == n;
  });
}
// Rows holding instructions of a core's kernels (not Host DMA, which belongs to no kernel).
bool is_instruction_row(const std::string& n) {
  return is_compute_engine(n) || is_unit_row(n) || is_dma_queue(n);
}

// A JSON number as a double; anything else (missing, bool, string) is 0.
double num(const nlohmann::json& v) {
  return v.is_number() ? v.get<double>() : 0.0;
}
double num(const nlohmann::json& obj, const char* key, double fallback = 0.0) {
  if (!obj.is_object() || !obj.contains(key)) return fallback;
  return num(obj[key]);
}
// The metadata entry, or an empty object when it is missing or empty.
nlohmann::json entry_or_empty(const nlohmann::json& meta, const char* key) {
  if (!meta.contains(key)) return nlohmann::json::object();
  const nlohmann::json& v = meta[key];
  const bool empty = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
                     (v.is_number() && v.get<double>() == 0) ||
                     ((v.is_string() || v.is_array() || v.is_object()) && v.empty());
  return empty ? nlohmann::json::object() : v;
}

// Picoseconds as nanoseconds, divided (not scaled by 1e-3) so the value is the exact quotient.
double ns_of(uint64_t ps) {
  return static_cast<double>(ps) / 1000.0;
}

struct Row {
  std::string process, name;
  std::vector<const SliceRecord*> slices;  // by start, then longest first
};

// The slice rows by (process, row name), in order of first appearance.
std::vector<Row> rows_of(const Trace& t) {
  std::vector<Row> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const SliceRecord& r : t.slices) {
    if (r.track >= t.tracks.size()) continue;
    const sim::TrackInfo& tr = t.tracks[r.track];
    auto [it, added] = index.try_emplace({tr.process, tr.name}, rows.size());
    if (added) rows.push_back({tr.process, tr.name, {}});
    rows[it->second].slices.push_back(&r);
  }
  for (Row& row : rows) {
    std::stable_sort(row.slices.begin(), row.slices.end(),
                     [](const SliceRecord* a, const SliceRecord* b) {
                       return a->begin != b->begin ? a->begin < b->begin : a->end > b->end;
                     });
  }
  return rows;
}

using EngineIntervals =
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint64_t, uint64_t>>>;

std::string role_of(const std::string& row) {
  if (is_compute_engine(row)) return "engine";
  if (is_unit_row(row)) return "unit";
  if (base_row(row) == kAllDma) return "dma";
  return is_dma_queue(row) ? "dma_queue" : "";
}

// The engine rows' summaries; returns their intervals by (process, row).
EngineIntervals add_engines(Summary& s, const std::vector<Row>& rows, uint64_t span) {
  EngineIntervals iv;
  std::set<std::string> active;
  for (const Row& row : rows) {
    const bool engine = is_compute_engine(row.name) || is_unit_row(row.name);
    const bool dma = is_dma_queue(row.name);
    if (!engine && !dma) continue;
    // Active physical cores: a logical core's pcores count one each.
    const std::string pcore = split_pcore(row.name).first;
    if (!is_unit_row(row.name)) {
      active.insert(pcore.empty() ? row.process : row.process + " " + pcore);
    }
    auto& own = iv[{row.process, row.name}];
    const std::string all_dma = pcore.empty() ? kAllDma : pcore + " " + kAllDma;
    double row_flops = 0;
    for (const SliceRecord* r : row.slices) {
      own.push_back({r->begin.ps, r->end.ps});
      if (dma) {
        iv[{row.process, all_dma}].push_back({r->begin.ps, r->end.ps});
        s.dma_bytes += num(r->args, "bytes");
        s.hbm_bytes += num(r->args, "hbm_bytes");
      }
      row_flops += num(r->args, "flops");
    }
    s.flops += row_flops;
  }
  // Key order decides bottleneck ties.
  for (const auto& [key, intervals] : iv) {
    EngineSummary e;
    e.process = key.first;
    e.engine = key.second;
    e.instructions = intervals.size();
    e.busy = union_length(intervals);
    e.utilisation = span > 0 ? static_cast<double>(e.busy.ps) / static_cast<double>(span) : 0;
    e.role = role_of(e.engine);
    if ((is_compute_engine(e.engine) || base_row(e.engine) == kAllDma) &&
        e.utilisation > s.bottleneck_utilisation) {
      s.bottleneck_utilisation = e.utilisation;
      s.bottleneck = e.process + " " + e.engine;
    }
    s.engines.push_back(e);
  }
  std::stable_sort(s.engines.begin(), s.engines.end(),
                   [](const EngineSummary& a, const EngineSummary& b) {
                     if (a.process != b.process) return a.process < b.process;
                     return engine_before(a.engine, b.engine);
                   });
  s.active_cores.assign(active.begin(), active.end());
  return iv;
}

// The busy fraction of each of `bins` bins of `bin` ps from `begin`, of sorted intervals.
std::vector<double> binned(std::vector<std::pair<uint64_t, uint64_t>> iv, uint64_t begin,
                           uint64_t bin, size_t bins) {
  std::vector<double> out(bins, 0.0);
  std::sort(iv.begin(), iv.end());
  uint64_t covered = begin;  // union: each stretch counted once
  for (auto [b, e] : iv) {
    b = std::max(b, covered);
    if (e <= b) continue;
    covered = e;
    for (uint64_t at = b; at < e;) {
      const size_t i = std::min<size_t>(bins - 1, (at - begin) / bin);
      const uint64_t bin_end = begin + (i + 1) * bin;
      const uint64_t upto = i + 1 == bins ? e : std::min(e, bin_end);
      out[i] += static_cast<double>(upto - at);
      at = upto;
    }
  }
  for (double& x : out) x = std::min(1.0, x / static_cast<double>(bin));
  return out;
}

// Where the window's time went (time_account.h), what limits the run and the timeline.
void add_time(Summary& s, const Trace& t, const EngineIntervals& iv, size_t bins) {
  TimeAccumulator acc(s.begin);
  for (const SliceRecord& r : t.slices) {
    if (r.track >= t.tracks.size()) continue;
    if (auto part = part_of_category(r.category)) acc.add(*part, r.begin, r.end);
  }
  std::vector<OwnedSpan> spans;
  s.time = acc.account(s.end, &spans);

  std::vector<std::pair<uint64_t, uint64_t>> any;
  for (const auto& [key, intervals] : iv) {
    if (role_of(key.second) == "dma") continue;  // its queues are there
    any.insert(any.end(), intervals.begin(), intervals.end());
  }
  s.engines_busy = union_length(std::move(any));

  std::vector<std::pair<std::string, sim::SimTime>> limiting;
  for (const EngineSummary& e : s.engines) {
    if (e.role == "engine" || e.role == "dma")
      limiting.push_back({e.process + " " + e.engine, e.busy});
  }
  s.limit = limit_of(s.time, limiting);

  const uint64_t span = s.end.ps - s.begin.ps;
  if (bins == 0 || span == 0) return;
  bins = static_cast<size_t>(std::min<uint64_t>(bins, span));
  const uint64_t bin = (span + bins - 1) / bins;
  s.timeline.begin = s.begin;
  s.timeline.bin = {bin};
  const bool multi = s.active_cores.size() > 1;
  for (const EngineSummary& e : s.engines) {
    if (e.role != "engine" && e.role != "dma") continue;
    auto it = iv.find({e.process, e.engine});
    if (it == iv.end()) continue;
    s.timeline.rows.push_back({multi ? e.process + " " + e.engine : e.engine, "engine",
                               binned(it->second, s.begin.ps, bin, bins)});
  }
  for (size_t p = 0; p < kTimePartCount; ++p) {
    const auto part = static_cast<TimePart>(p);
    if (part == TimePart::kKernels || part == TimePart::kIdle || s.time.exposed[p].ps == 0) {
      continue;
    }
    std::vector<std::pair<uint64_t, uint64_t>> owned;
    for (const OwnedSpan& o : spans) {
      if (o.part == part) owned.push_back({o.begin.ps, o.end.ps});
    }
    s.timeline.rows.push_back({std::string(time_part_name(part)), "part",
                               binned(std::move(owned), s.begin.ps, bin, bins)});
  }
}

bool is_section(const SliceRecord& r) {
  return r.category == "section";
}

// A core's "Kernels" row split into the kernels (a compiled graph's fused programs in place of
// the launch that holds them) and the launches of compiled graphs, each by start.
struct KernelRow {
  std::vector<const SliceRecord*> kernels, graphs;
};

KernelRow split_kernel_row(const Row& row) {
  KernelRow out;
  // Launches holding sections: the program a section names, starting at or before it.
  std::set<const SliceRecord*> holders;
  for (size_t i = 0; i < row.slices.size(); ++i) {
    const SliceRecord* sec = row.slices[i];
    if (!is_section(*sec) || !sec->args.contains("program")) continue;
    const nlohmann::json& program = sec->args["program"];
    for (size_t j = i; j-- > 0;) {
      const SliceRecord* h = row.slices[j];
      if (!is_section(*h) && program.is_string() && h->name == program.get<std::string>() &&
          h->begin <= sec->begin && sec->begin <= h->end) {
        holders.insert(h);
        break;
      }
    }
  }
  for (const SliceRecord* r : row.slices)
    (holders.count(r) ? out.graphs : out.kernels).push_back(r);
  return out;
}

// Adds a slice's launch to the summary entry of its name, in order of first appearance.
void count_launch(std::vector<KernelSummary>& list, std::map<std::string, size_t>& index,
                  std::map<std::string, KernelSummary>& work, const SliceRecord& r) {
  auto [it, added] = index.try_emplace(r.name, list.size());
  if (added) {
    KernelSummary k = work[r.name];
    k.name = r.name;
    list.push_back(k);
  }
  KernelSummary& k = list[it->second];
  ++k.launches;
  k.total = k.total + (r.end - r.begin);
  k.instructions += static_cast<int64_t>(num(r.args, "instructions"));
  if (is_section(r) && r.args.contains("nodes") && r.args["nodes"].is_string()) {
    k.nodes = r.args["nodes"].get<std::string>();
  }
}

void add_kernels(Summary& s, const std::vector<Row>& rows) {
  std::map<std::string, KernelRow> kernel_rows;  // per core
  for (const Row& row : rows) {
    if (row.name == "Kernels") kernel_rows[row.process] = split_kernel_row(row);
  }
  // The launch containing [b, e), among a core's graph launches (by start).
  auto inside_graph = [](const KernelRow& kr, sim::SimTime b, sim::SimTime e) {
    auto it = std::upper_bound(kr.graphs.begin(), kr.graphs.end(), b,
                               [](sim::SimTime t, const SliceRecord* x) { return t < x->begin; });
    return it != kr.graphs.begin() && e <= (*(it - 1))->end;
  };
  std::map<std::string, KernelSummary> work, graph_work;
  // Per kernel, per engine ("DMA" for the queues together): its instructions' intervals.
  using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;
  std::map<std::string, std::map<std::string, Intervals>> busy, graph_busy;
  for (const Row& row : rows) {
    if (!is_instruction_row(row.name)) continue;
    const std::string engine = is_dma_queue(row.name)
                                   ? std::string(device_model::engine_info(device_model::EngineKind::kDma).row)
                                   : (is_compute_engine(row.name) ? base_row(row.name) : "");
    auto k = kernel_rows.find(row.process);
    for (const SliceRecord* r : row.slices) {
      // The last kernel starting at or before the instruction, if it also ends after it (or,
      // for a fused program, its graph's launch does).
      const SliceRecord* kernel = nullptr;
      if (k != kernel_rows.end()) {
        const auto& ks = k->second.kernels;
        auto it =
            std::upper_bound(ks.begin(), ks.end(), r->begin,
                             [](sim::SimTime t, const SliceRecord* x) { return t < x->begin; });
        if (it != ks.begin()) kernel = *(it - 1);
      }
      const bool inside =
          kernel && (r->end <= kernel->end ||
                     (is_section(*kernel) && inside_graph(k->second, r->begin, r->end)));
      if (!inside) {
        ++s.instructions_outside_kernels;
        continue;
      }
      auto add = [&](KernelSummary& w) {
        w.flops += num(r->args, "flops");
        if (is_dma_queue(row.name)) {
          w.bytes += num(r->args, "bytes");
          w.hbm_bytes += num(r->args, "hbm_bytes");
        }
      };
      add(work[kernel->name]);
      if (!engine.empty()) busy[kernel->name][engine].push_back({r->begin.ps, r->end.ps});
      if (is_section(*kernel)) {
        const std::string program = kernel->args.value("program", std::string());
        add(graph_work[program]);
        if (!engine.empty()) graph_busy[program][engine].push_back({r->begin.ps, r->end.ps});
      }
    }
  }
  for (auto& [name, engines] : busy) {
    for (auto& [engine, iv] : engines) work[name].engine_busy[engine] = union_length(std::move(iv));
  }
  for (auto& [name, engines] : graph_busy) {
    for (auto& [engine, iv] : engines) {
      graph_work[name].engine_busy[engine] = union_length(std::move(iv));
    }
  }
  std::vector<KernelSummary> kernels, graphs;
  std::map<std::string, size_t> index, graph_index;
  for (const Row& row : rows) {
    if (row.name != "Kernels") continue;
    const KernelRow& kr = kernel_rows[row.process];
    for (const SliceRecord* r : kr.kernels) {
      count_launch(kernels, index, work, *r);
      s.kernel_time = s.kernel_time + (r->end - r->begin);
    }
    for (const SliceRecord* r : kr.graphs) count_launch(graphs, graph_index, graph_work, *r);
  }
  auto by_total = [](const KernelSummary& a, const KernelSummary& b) {
    return a.total != b.total ? a.total > b.total : a.name < b.name;
  };
  std::stable_sort(kernels.begin(), kernels.end(), by_total);
  std::stable_sort(graphs.begin(), graphs.end(), by_total);
  s.kernels = std::move(kernels);
  s.graph_launches = std::move(graphs);
}

void add_ops(Summary& s, const std::vector<Row>& rows) {
  std::vector<OpSummary> ops;
  std::map<std::string, size_t> index;
  for (const Row& row : rows) {
    if (row.name != "Ops") continue;
    std::vector<sim::SimTime> open_ends;
    for (const SliceRecord* r : row.slices) {
      while (!open_ends.empty() && open_ends.back() <= r->begin) open_ends.pop_back();
      if (open_ends.empty()) s.op_time = s.op_time + (r->end - r->begin);
      open_ends.push_back(r->end);
      auto [it, added] = index.try_emplace(r->name, ops.size());
      if (added) ops.push_back({r->name, 0, {}});
      ++ops[it->second].count;
      ops[it->second].total = ops[it->second].total + (r->end - r->begin);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const OpSummary& a, const OpSummary& b) {
    return a.total != b.total ? a.total > b.total : a.name < b.name;
  });
  s.ops = std::move(ops);
  // Host op ranges that launched nothing (views, metadata, host-only ops): not in the op table.
  std::map<std::string, uint64_t> idle;
  for (const Row& row : rows) {
    if (row.name != "ATen ops") continue;
    for (const SliceRecord* r : row.slices) {
      if (r->args.is_object() && r->args.contains("kernels_on_cores") &&
          num(r->args["kernels_on_cores"]) == 0) {
        ++idle[r->name];
      }
    }
  }
  s.ops_without_kernels.assign(idle.begin(), idle.end());
  std::stable_sort(s.ops_without_kernels.begin(), s.ops_without_kernels.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
}

double percent(sim::SimTime part, sim::SimTime whole) {
  return whole.ps ? static_cast<double>(100 * part.ps) / static_cast<double>(whole.ps) : 0.0;
}

}  // namespace

bool engine_before(const std::string& a_row, const std::string& b_row) {
  // A logical core's physical cores in order, each one's engines in the usual order.
  const auto [pa, a] = split_pcore(a_row);
  const auto [pb, b] = split_pcore(b_row);
  if (pa != pb) return pa.size() != pb.size() ? pa.size() < pb.size() : pa < pb;
  // The engine table's order: each compute engine with its units' rows, then the DMA queues
  // together and one by one.
  static const std::vector<std::string> order = [] {
    std::vector<std::string> o;
    for (const device_model::EngineInfo& e : kEngines) {
      if (!e.compute) continue;
      o.emplace_back(e.row);
      if (!e.unit_row.empty()) o.emplace_back(e.unit_row);
    }
    o.push_back(kAllDma);
    return o;
  }();
  auto rank = [](const std::string& e) -> std::pair<size_t, int64_t> {
    auto it = std::find(order.begin(), order.end(), e);
    if (it != order.end()) return {static_cast<size_t>(it - order.begin()), 0};
    const std::string q =
        e.size() > kDmaQueueRowPrefix.size() ? e.substr(kDmaQueueRowPrefix.size()) : "";
    if (is_dma_queue(e) && !q.empty() && std::all_of(q.begin(), q.end(), ::isdigit)) {
      return {order.size(), std::stoll(q)};
    }
    return {order.size() + 1, 0};
  };
  const auto ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb;
  return ra.first == order.size() + 1 && a < b;
}

void sort_engine_labels(std::vector<std::string>& labels) {
  auto split = [](const std::string& l) -> std::pair<std::string, std::string> {
    const size_t space = l.find(' ');
    if (l.rfind("nc", 0) == 0 && space != std::string::npos) {
      return {l.substr(0, space), l.substr(space + 1)};
    }
    return {"", l};
  };
  std::stable_sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    const auto [pa, ea] = split(a);
    const auto [pb, eb] = split(b);
    return pa != pb ? pa < pb : engine_before(ea, eb);
  });
}

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

Summary summarize(const Trace& t, size_t bins) {
  Summary s;
  s.metadata = t.metadata.is_object() ? t.metadata : nlohmann::json::object();
  s.preset = s.metadata.contains("preset") && s.metadata["preset"].is_string()
                 ? s.metadata["preset"].get<std::string>()
                 : "";
  bool any = false;
  uint64_t lo = 0, hi = 0;
  for (const SliceRecord& r : t.slices) {
    if (r.track >= t.tracks.size()) continue;
    if (!any || r.begin.ps < lo) lo = r.begin.ps;
    if (!any || r.end.ps > hi) hi = r.end.ps;
    any = true;
  }
  // The recording's window (neuronsim traces carry it), widened to every slice.
  auto ps_of = [](const nlohmann::json& v) {
    return static_cast<uint64_t>(std::llround(num(v) * 1e3));
  };
  if (s.metadata.contains("begin_ns") && s.metadata["begin_ns"].is_number()) {
    const uint64_t b = ps_of(s.metadata["begin_ns"]);
    lo = any ? std::min(lo, b) : b;
    hi = any ? hi : b;
    any = true;
  }
  if (any && s.metadata.contains("end_ns") && s.metadata["end_ns"].is_number()) {
    hi = std::max(hi, ps_of(s.metadata["end_ns"]));
  }
  s.begin = {lo};
  s.end = {hi};
  const std::vector<Row> rows = rows_of(t);
  const EngineIntervals engine_intervals = add_engines(s, rows, hi - lo);
  add_kernels(s, rows);
  add_ops(s, rows);
  add_time(s, t, engine_intervals, bins);
  const double seconds = static_cast<double>(hi - lo) * 1e-12;
  if (seconds > 0) {
    s.achieved_flops_per_s = s.flops / seconds;
    s.achieved_hbm_bytes_per_s = s.hbm_bytes / seconds;
  }
  const nlohmann::json peaks = entry_or_empty(s.metadata, "peaks");
  const nlohmann::json config = entry_or_empty(s.metadata, "config");
  const double cores = std::max<double>(1, static_cast<double>(s.active_cores.size()));
  // Each core streams from the stack it is attached to; stacks shared by several active cores
  // count once.
  const double cores_per_stack = std::max(
      1.0, num(config, "chip.cores", 1.0) / std::max(1.0, num(config, "chip.hbm_stacks", 1.0)));
  s.peak_flops_per_s = num(peaks, "tensor_flops_per_core") * cores;
  s.peak_hbm_bytes_per_s =
      num(peaks, "hbm_bytes_per_s_per_stack") * std::ceil(cores / cores_per_stack);
  return s;
}

nlohmann::json summary_document(const std::string& text, const std::string& origin,
                                bool accept_summary) {
  nlohmann::json doc = parse_json(text, origin);
  if (accept_summary && doc.is_object()) {
    if (doc.value("format", nlohmann::json()) == kSummaryFormat) return doc;
    if (!doc.contains("traceEvents")) {
      throw TraceFormatError(fmt::format(
          "{}: neither a neuronsim trace nor a `neuronsim run --summary-json` file", origin));
    }
  }
  return summarize(parse_neuronsim_trace(doc, origin)).to_json();
}

nlohmann::json Summary::to_json() const {
  nlohmann::json j;
  j["format"] = kSummaryFormat;
  j["preset"] = metadata.contains("preset") ? metadata["preset"] : nlohmann::json("");
  for (const char* k : {"overrides", "config", "peaks", "op_report", "distributed"}) {
    j[k] = entry_or_empty(metadata, k);
  }
  for (const char* k : {"device_time_ns", "host_time_ns", "end_ns"}) j[k] = num(metadata, k);
  j["window_begin_ns"] = ns_of(begin.ps);
  j["window_end_ns"] = ns_of(end.ps);
  j["window_ns"] = ns_of(duration().ps);
  j["bottleneck"] = bottleneck;
  j["bottleneck_utilisation"] = bottleneck_utilisation;
  auto& es = j["engines"] = nlohmann::json::array();
  for (const auto& e : engines) {
    es.push_back({{"process", e.process},
                  {"engine", e.engine},
                  {"role", e.role},
                  {"instructions", e.instructions},
                  {"busy_ns", ns_of(e.busy.ps)},
                  {"utilisation", e.utilisation}});
  }
  j["active_cores"] = active_cores;
  j["flops"] = flops;
  j["dma_bytes"] = dma_bytes;
  j["hbm_bytes"] = hbm_bytes;
  j["achieved_flops_per_s"] = achieved_flops_per_s;
  j["peak_flops_per_s"] = peak_flops_per_s;
  j["achieved_hbm_bytes_per_s"] = achieved_hbm_bytes_per_s;
  j["peak_hbm_bytes_per_s"] = peak_hbm_bytes_per_s;
  auto& os = j["ops"] = nlohmann::json::array();
  for (const auto& o : ops) {
    os.push_back({{"name", o.name},
                  {"count", o.count},
                  {"total_ns", ns_of(o.total.ps)},
                  {"percent", percent(o.total, op_time)}});
  }
  j["op_time_ns"] = ns_of(op_time.ps);
  uint64_t no_kernel_calls = 0;
  nlohmann::json no_kernel = nlohmann::json::array();
  for (const auto& [name, n] : ops_without_kernels) {
    no_kernel_calls += n;
    if (no_kernel.size() < 10) no_kernel.push_back({name, n});
  }
  j["ops_without_kernels"] = {{"calls", no_kernel_calls}, {"top", std::move(no_kernel)}};
  auto kernel_json = [](const KernelSummary& k, sim::SimTime whole) {
    const double secs = static_cast<double>(k.total.ps) * 1e-12;
    nlohmann::json x = {{"name", k.name},
                        {"launches", k.launches},
                        {"instructions", k.instructions},
                        {"total_ns", ns_of(k.total.ps)},
                        {"percent", percent(k.total, whole)},
                        {"flops", k.flops},
                        {"bytes", k.bytes},
                        {"hbm_bytes", k.hbm_bytes},
                        {"intensity", k.hbm_bytes > 0 ? nlohmann::json(k.flops / k.hbm_bytes)
                                                      : nlohmann::json(nullptr)},
                        {"achieved_flops_per_s", k.total.ps ? k.flops / secs : 0.0},
                        {"achieved_hbm_bytes_per_s", k.total.ps ? k.hbm_bytes / secs : 0.0}};
    if (!k.nodes.empty()) x["fused_nodes"] = k.nodes;
    nlohmann::json busy = nlohmann::json::object();
    for (const auto& [engine, t] : k.engine_busy) busy[engine] = ns_of(t.ps);
    x["engine_busy_ns"] = std::move(busy);
    return x;
  };
  auto& ks = j["kernels"] = nlohmann::json::array();
  for (const auto& k : kernels) ks.push_back(kernel_json(k, kernel_time));
  sim::SimTime graph_time;
  for (const auto& g : graph_launches) graph_time = graph_time + g.total;
  auto& gs = j["graph_launches"] = nlohmann::json::array();
  for (const auto& g : graph_launches) gs.push_back(kernel_json(g, graph_time));
  // What torch.compile did in the traced run (neuronsim.compile_stats(), recorded by tracing).
  j["compile"] = entry_or_empty(metadata, "compile");
  j["kernel_time_ns"] = ns_of(kernel_time.ps);
  j["time_account"] = time.to_json();
  j["time_account"]["engines_busy_ns"] = ns_of(engines_busy.ps);
  j["limit"] = traces::to_json(limit);
  nlohmann::json rows = nlohmann::json::array();
  for (const Timeline::Row& r : timeline.rows) {
    nlohmann::json busy = nlohmann::json::array();
    // Four decimals: the page shows percentages; the document stays small.
    for (double x : r.busy) busy.push_back(std::round(x * 1e4) / 1e4);
    rows.push_back({{"label", r.label}, {"kind", r.kind}, {"busy", std::move(busy)}});
  }
  j["timeline"] = {{"begin_ns", ns_of(timeline.begin.ps)},
                   {"bin_ns", ns_of(timeline.bin.ps)},
                   {"rows", std::move(rows)}};
  j["instructions_outside_kernels"] = instructions_outside_kernels;
  int64_t native = 0, fallback = 0;
  std::vector<std::string> fallback_ops;
  for (const auto& [name, counts] : j["op_report"].items()) {
    native += static_cast<int64_t>(num(counts, "native"));
    fallback += static_cast<int64_t>(num(counts, "fallback"));
    if (num(counts, "fallback") > 0) fallback_ops.push_back(name);
  }
  std::sort(fallback_ops.begin(), fallback_ops.end());
  j["native_calls"] = native;
  j["fallback_calls"] = fallback;
  j["fallback_ops"] = fallback_ops;
  return j;
}

}  // namespace neuronsim::traces
