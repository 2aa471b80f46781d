#include "neuronsim/traces/summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

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
std::string role_of(const std::string& row) {
  if (is_compute_engine(row)) return "engine";
  if (is_unit_row(row)) return "unit";
  if (base_row(row) == kAllDma) return "dma";
  return is_dma_queue(row) ? "dma_queue" : "";
}
// The engine a row's instructions count towards in a kernel's busy times ("DMA" for a queue);
// "" for a unit's row.
std::string engine_of_row(const std::string& row) {
  if (is_dma_queue(row)) {
    return std::string(device_model::engine_info(device_model::EngineKind::kDma).row);
  }
  return is_compute_engine(row) ? base_row(row) : "";
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

// What the summary keeps of a slice, by the kind of row it is on.
struct InstructionSlice {  // an engine's or a DMA queue's instruction
  uint64_t begin, end;
  double flops, bytes, hbm_bytes;
  uint32_t seq;  // its place in the trace
};
struct KernelSlice {  // a "Kernels" row's kernel, compiled-graph launch or section
  uint64_t begin, end;
  double instructions;
  uint32_t seq, name;
  int32_t program = -1, nodes = -1;  // string ids; -1: no such string arg
  bool section = false;
};
struct OpSlice {  // an "Ops" row's device op span
  uint64_t begin, end;
  uint32_t seq, name;
};

struct HostOpSlice {  // an "ATen ops" row's host op range that launched no kernel
  uint32_t name;
};

enum class RowKind : uint8_t { kOther, kInstructions, kKernels, kOps, kHostOps };
RowKind kind_of(const std::string& row) {
  if (is_instruction_row(row)) return RowKind::kInstructions;
  if (row == "Kernels") return RowKind::kKernels;
  if (row == "Ops") return RowKind::kOps;
  if (row == "ATen ops") return RowKind::kHostOps;
  return RowKind::kOther;
}

// Slices by start, then longest first, then in trace order (a stable sort of the trace's order).
template <typename S>
void sort_slices(std::vector<S>& v) {
  std::sort(v.begin(), v.end(), [](const S& a, const S& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.seq < b.seq;
  });
}

struct Row {
  std::string process, name;
  RowKind kind = RowKind::kOther;
  uint32_t first_seq = 0;
  std::vector<InstructionSlice> instructions;
  std::vector<KernelSlice> kernels;
  std::vector<OpSlice> ops;
  std::vector<HostOpSlice> idle_ops;
};

// A slice that counts towards a part of the time account (time_account.h).
struct PartSlice {
  TimePart part;
  uint64_t begin, end;
};

}  // namespace

struct SummaryBuilder::Impl {
  // A (pid, tid) row as it is read; its name may come after its first slices.
  struct Pending {
    uint64_t begin, end;
    uint32_t seq;
    std::string name, category;
    nlohmann::json args;
  };
  struct Thread {
    bool known = false;  // its kind is known (its name was, when its slices came)
    RowKind kind = RowKind::kOther;
    uint32_t first_seq = 0;
    std::vector<InstructionSlice> instructions;
    std::vector<KernelSlice> kernels;
    std::vector<OpSlice> ops;
    std::vector<HostOpSlice> idle_ops;
    std::vector<Pending> pending;
  };
  std::vector<PartSlice> parts;
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> row_names;
  std::map<std::pair<int64_t, int64_t>, Thread> threads;
  std::pair<int64_t, int64_t> last_key{};
  Thread* last = nullptr;
  std::vector<std::string> strings;
  std::unordered_map<std::string, uint32_t> string_ids;
  uint32_t seq = 0;
  bool any = false;
  uint64_t lo = 0, hi = 0;
  nlohmann::json metadata = nlohmann::json::object();

  uint32_t id_of(std::string_view s) {
    auto [it, added] =
        string_ids.try_emplace(std::string(s), static_cast<uint32_t>(strings.size()));
    if (added) strings.push_back(it->first);
    return it->second;
  }
  int32_t string_arg(const nlohmann::json& args, const char* key) {
    if (!args.is_object()) return -1;
    const auto it = args.find(key);
    if (it == args.end() || !it->is_string()) return -1;
    return static_cast<int32_t>(id_of(it->get_ref<const std::string&>()));
  }
  void add(Thread& t, RowKind kind, uint64_t b, uint64_t e, uint32_t at, std::string_view name,
           std::string_view category, const nlohmann::json& args) {
    switch (kind) {
      case RowKind::kInstructions:
        t.instructions.push_back(
            {b, e, num(args, "flops"), num(args, "bytes"), num(args, "hbm_bytes"), at});
        return;
      case RowKind::kKernels: {
        KernelSlice k{b, e, num(args, "instructions"), at, id_of(name)};
        k.section = category == "section";
        k.program = string_arg(args, "program");
        k.nodes = string_arg(args, "nodes");
        t.kernels.push_back(k);
        return;
      }
      case RowKind::kOps:
        t.ops.push_back({b, e, at, id_of(name)});
        return;
      case RowKind::kHostOps:
        if (args.is_object() && args.contains("kernels_on_cores") &&
            num(args["kernels_on_cores"]) == 0) {
          t.idle_ops.push_back({id_of(name)});
        }
        return;
      case RowKind::kOther:
        return;
    }
  }
};

SummaryBuilder::SummaryBuilder() : impl_(std::make_unique<Impl>()) {}
SummaryBuilder::~SummaryBuilder() = default;

void SummaryBuilder::name_process(int64_t pid, const std::string& name) {
  impl_->process_names[pid] = name;
}

void SummaryBuilder::name_row(int64_t pid, int64_t tid, const std::string& name) {
  impl_->row_names[{pid, tid}] = name;
}

void SummaryBuilder::set_metadata(nlohmann::json metadata) {
  impl_->metadata = std::move(metadata);
}

void SummaryBuilder::slice(int64_t pid, int64_t tid, std::string_view name,
                           std::string_view category, sim::SimTime begin, sim::SimTime end,
                           const nlohmann::json& args) {
  Impl& d = *impl_;
  const uint32_t at = d.seq++;
  if (auto part = part_of_category(category)) d.parts.push_back({*part, begin.ps, end.ps});
  if (!d.any || begin.ps < d.lo) d.lo = begin.ps;
  if (!d.any || end.ps > d.hi) d.hi = end.ps;
  d.any = true;
  const std::pair<int64_t, int64_t> key{pid, tid};
  if (!d.last || d.last_key != key) {
    auto [it, added] = d.threads.try_emplace(key);
    if (added) it->second.first_seq = at;
    d.last = &it->second;
    d.last_key = key;
  }
  Impl::Thread& t = *d.last;
  if (!t.known) {
    const auto n = d.row_names.find(key);
    if (n != d.row_names.end()) {
      t.known = true;
      t.kind = kind_of(n->second);
    }
  }
  if (t.known) {
    d.add(t, t.kind, begin.ps, end.ps, at, name, category, args);
  } else {
    t.pending.push_back({begin.ps, end.ps, at, std::string(name), std::string(category), args});
  }
}

namespace {

using EngineIntervals =
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint64_t, uint64_t>>>;

// The engine rows' summaries; returns their intervals by (process, row).
EngineIntervals add_engines(Summary& s, const std::vector<Row>& rows, uint64_t span) {
  EngineIntervals iv;
  std::set<std::string> active;
  for (const Row& row : rows) {
    if (row.kind != RowKind::kInstructions) continue;
    const bool dma = is_dma_queue(row.name);
    // Active physical cores: a logical core's pcores count one each.
    const std::string pcore = split_pcore(row.name).first;
    if (!is_unit_row(row.name)) {
      active.insert(pcore.empty() ? row.process : row.process + " " + pcore);
    }
    auto& own = iv[{row.process, row.name}];
    const std::string all_dma = pcore.empty() ? kAllDma : pcore + " " + kAllDma;
    double row_flops = 0;
    for (const InstructionSlice& r : row.instructions) {
      own.push_back({r.begin, r.end});
      if (dma) {
        iv[{row.process, all_dma}].push_back({r.begin, r.end});
        s.dma_bytes += r.bytes;
        s.hbm_bytes += r.hbm_bytes;
      }
      row_flops += r.flops;
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
void add_time(Summary& s, const std::vector<PartSlice>& parts, const EngineIntervals& iv,
              size_t bins) {
  TimeAccumulator acc(s.begin);
  for (const PartSlice& p : parts) acc.add(p.part, {p.begin}, {p.end});
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

// A core's "Kernels" row split into the kernels (a compiled graph's fused programs in place of
// the launch that holds them) and the launches of compiled graphs, each by start.
struct KernelRow {
  std::vector<const KernelSlice*> kernels, graphs;
};

KernelRow split_kernel_row(const Row& row) {
  KernelRow out;
  // Launches holding sections: the program a section names, starting at or before it.
  std::set<const KernelSlice*> holders;
  const auto& slices = row.kernels;
  for (size_t i = 0; i < slices.size(); ++i) {
    const KernelSlice& sec = slices[i];
    if (!sec.section || sec.program < 0) continue;
    for (size_t j = i; j-- > 0;) {
      const KernelSlice& h = slices[j];
      if (!h.section && h.name == static_cast<uint32_t>(sec.program) && h.begin <= sec.begin &&
          sec.begin <= h.end) {
        holders.insert(&h);
        break;
      }
    }
  }
  for (const KernelSlice& r : slices) (holders.count(&r) ? out.graphs : out.kernels).push_back(&r);
  return out;
}

// Adds a slice's launch to the summary entry of its name, in order of first appearance.
void count_launch(std::vector<KernelSummary>& list, std::map<uint32_t, size_t>& index,
                  std::map<uint32_t, KernelSummary>& work, const KernelSlice& r,
                  const std::vector<std::string>& strings) {
  auto [it, added] = index.try_emplace(r.name, list.size());
  if (added) {
    KernelSummary k = work[r.name];
    k.name = strings[r.name];
    list.push_back(k);
  }
  KernelSummary& k = list[it->second];
  ++k.launches;
  k.total = k.total + sim::SimTime{r.end - r.begin};
  k.instructions += static_cast<int64_t>(r.instructions);
  if (r.section && r.nodes >= 0) k.nodes = strings[r.nodes];
}

void add_kernels(Summary& s, const std::vector<Row>& rows, const std::vector<std::string>& strings,
                 uint32_t empty_string) {
  std::map<std::string, KernelRow> kernel_rows;  // per core
  for (const Row& row : rows) {
    if (row.kind == RowKind::kKernels) kernel_rows[row.process] = split_kernel_row(row);
  }
  // The launch containing [b, e), among a core's graph launches (by start).
  auto inside_graph = [](const KernelRow& kr, uint64_t b, uint64_t e) {
    auto it = std::upper_bound(kr.graphs.begin(), kr.graphs.end(), b,
                               [](uint64_t t, const KernelSlice* x) { return t < x->begin; });
    return it != kr.graphs.begin() && e <= (*(it - 1))->end;
  };
  // By name id: a compiled graph's launch by its program's name (the empty string when none).
  std::map<uint32_t, KernelSummary> work, graph_work;
  // Per kernel, per engine ("DMA" for the queues together): its instructions' intervals.
  using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;
  std::map<uint32_t, std::map<std::string, Intervals>> busy, graph_busy;
  for (const Row& row : rows) {
    if (row.kind != RowKind::kInstructions) continue;
    const bool dma = is_dma_queue(row.name);
    const std::string engine = engine_of_row(row.name);
    auto k = kernel_rows.find(row.process);
    for (const InstructionSlice& r : row.instructions) {
      // The last kernel starting at or before the instruction, if it also ends after it (or,
      // for a fused program, its graph's launch does).
      const KernelSlice* kernel = nullptr;
      if (k != kernel_rows.end()) {
        const auto& ks = k->second.kernels;
        auto it = std::upper_bound(ks.begin(), ks.end(), r.begin,
                                   [](uint64_t t, const KernelSlice* x) { return t < x->begin; });
        if (it != ks.begin()) kernel = *(it - 1);
      }
      const bool inside = kernel && (r.end <= kernel->end ||
                                     (kernel->section && inside_graph(k->second, r.begin, r.end)));
      if (!inside) {
        ++s.instructions_outside_kernels;
        continue;
      }
      auto add = [&](KernelSummary& w) {
        w.flops += r.flops;
        if (dma) {
          w.bytes += r.bytes;
          w.hbm_bytes += r.hbm_bytes;
        }
      };
      add(work[kernel->name]);
      if (!engine.empty()) busy[kernel->name][engine].push_back({r.begin, r.end});
      if (kernel->section) {
        const uint32_t program =
            kernel->program >= 0 ? static_cast<uint32_t>(kernel->program) : empty_string;
        add(graph_work[program]);
        if (!engine.empty()) graph_busy[program][engine].push_back({r.begin, r.end});
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
  std::map<uint32_t, size_t> index, graph_index;
  for (const Row& row : rows) {
    if (row.kind != RowKind::kKernels) continue;
    const KernelRow& kr = kernel_rows[row.process];
    for (const KernelSlice* r : kr.kernels) {
      count_launch(kernels, index, work, *r, strings);
      s.kernel_time = s.kernel_time + sim::SimTime{r->end - r->begin};
    }
    for (const KernelSlice* r : kr.graphs)
      count_launch(graphs, graph_index, graph_work, *r, strings);
  }
  auto by_total = [](const KernelSummary& a, const KernelSummary& b) {
    return a.total != b.total ? a.total > b.total : a.name < b.name;
  };
  std::stable_sort(kernels.begin(), kernels.end(), by_total);
  std::stable_sort(graphs.begin(), graphs.end(), by_total);
  s.kernels = std::move(kernels);
  s.graph_launches = std::move(graphs);
}

void add_ops(Summary& s, const std::vector<Row>& rows, const std::vector<std::string>& strings) {
  std::vector<OpSummary> ops;
  std::map<uint32_t, size_t> index;
  for (const Row& row : rows) {
    if (row.kind != RowKind::kOps) continue;
    std::vector<uint64_t> open_ends;
    for (const OpSlice& r : row.ops) {
      while (!open_ends.empty() && open_ends.back() <= r.begin) open_ends.pop_back();
      if (open_ends.empty()) s.op_time = s.op_time + sim::SimTime{r.end - r.begin};
      open_ends.push_back(r.end);
      auto [it, added] = index.try_emplace(r.name, ops.size());
      if (added) ops.push_back({strings[r.name], 0, {}});
      ++ops[it->second].count;
      ops[it->second].total = ops[it->second].total + sim::SimTime{r.end - r.begin};
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const OpSummary& a, const OpSummary& b) {
    return a.total != b.total ? a.total > b.total : a.name < b.name;
  });
  s.ops = std::move(ops);
  // Host op ranges that launched nothing (views, metadata, host-only ops): not in the op table.
  std::map<std::string, uint64_t> idle;
  for (const Row& row : rows) {
    for (const HostOpSlice& o : row.idle_ops) ++idle[strings[o.name]];
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

Summary SummaryBuilder::finish(size_t bins) {
  Impl& d = *impl_;
  Summary s;
  s.metadata = d.metadata.is_object() ? d.metadata : nlohmann::json::object();
  s.preset = s.metadata.contains("preset") && s.metadata["preset"].is_string()
                 ? s.metadata["preset"].get<std::string>()
                 : "";
  uint64_t lo = d.lo, hi = d.hi;
  bool any = d.any;
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
  // Rows by (process, row name), in order of first appearance; rows named alike are one.
  std::vector<Row> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<std::pair<uint32_t, std::pair<int64_t, int64_t>>> order;
  for (const auto& [key, t] : d.threads) order.push_back({t.first_seq, key});
  std::sort(order.begin(), order.end());
  for (const auto& [first, key] : order) {
    Impl::Thread& t = d.threads[key];
    const auto p = d.process_names.find(key.first);
    const auto n = d.row_names.find(key);
    std::string process = p != d.process_names.end() ? p->second : fmt::format("pid {}", key.first);
    std::string name = n != d.row_names.end() ? n->second : fmt::format("tid {}", key.second);
    const RowKind kind = kind_of(name);
    for (const Impl::Pending& q : t.pending) {
      d.add(t, kind, q.begin, q.end, q.seq, q.name, q.category, q.args);
    }
    auto [it, added] = index.try_emplace({process, name}, rows.size());
    if (added) rows.push_back({std::move(process), std::move(name), kind, first, {}, {}, {}, {}});
    Row& row = rows[it->second];
    auto move_into = [](auto& to, auto& from) {
      to.insert(to.end(), from.begin(), from.end());
      from.clear();
      from.shrink_to_fit();
    };
    move_into(row.instructions, t.instructions);
    move_into(row.kernels, t.kernels);
    move_into(row.ops, t.ops);
    move_into(row.idle_ops, t.idle_ops);
  }
  for (Row& row : rows) {
    sort_slices(row.instructions);
    sort_slices(row.kernels);
    sort_slices(row.ops);
  }
  const EngineIntervals engine_intervals = add_engines(s, rows, hi - lo);
  add_kernels(s, rows, d.strings, d.id_of(""));
  add_ops(s, rows, d.strings);
  add_time(s, d.parts, engine_intervals, bins);
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

Summary summarize(const Trace& t, size_t bins) {
  SummaryBuilder b;
  for (size_t i = 0; i < t.tracks.size(); ++i) {
    const auto pid = static_cast<int64_t>(i);
    b.name_process(pid, t.tracks[i].process);
    b.name_row(pid, 0, t.tracks[i].name);
  }
  for (const SliceRecord& r : t.slices) {
    if (r.track >= t.tracks.size()) continue;
    b.slice(r.track, 0, r.name, r.category, r.begin, r.end, r.args);
  }
  b.set_metadata(t.metadata);
  return b.finish(bins);
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
