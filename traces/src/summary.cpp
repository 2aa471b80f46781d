#include "neuronsim/traces/summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "neuronsim/traces/trace_reader.h"

namespace neuronsim::traces {
namespace {

constexpr const char* kLoadStationary = "TensorE (LoadStationary)";
constexpr const char* kAllDma = "DMA (all queues)";

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
  const std::string n = base_row(row);
  return n == "TensorE" || n == "VectorE" || n == "ScalarE" || n == "GpSimdE";
}
bool is_dma_queue(const std::string& row) {
  return base_row(row).rfind("DMA q", 0) == 0;
}
bool is_load_stationary(const std::string& row) {
  return base_row(row) == kLoadStationary;
}
// Rows holding instructions of a core's kernels (not Host DMA, which belongs to no kernel).
bool is_instruction_row(const std::string& n) {
  return is_compute_engine(n) || is_load_stationary(n) || is_dma_queue(n);
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

enum class RowKind : uint8_t { kOther, kInstructions, kKernels, kOps };
RowKind kind_of(const std::string& row) {
  if (is_instruction_row(row)) return RowKind::kInstructions;
  if (row == "Kernels") return RowKind::kKernels;
  if (row == "Ops") return RowKind::kOps;
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
    std::vector<Pending> pending;
  };
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

void add_engines(Summary& s, const std::vector<Row>& rows, uint64_t span) {
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint64_t, uint64_t>>> iv;
  std::set<std::string> active;
  for (const Row& row : rows) {
    if (row.kind != RowKind::kInstructions) continue;
    const bool dma = is_dma_queue(row.name);
    // Active physical cores: a logical core's pcores count one each.
    const std::string pcore = split_pcore(row.name).first;
    if (!is_load_stationary(row.name)) {
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
  for (const Row& row : rows) {
    if (row.kind != RowKind::kInstructions) continue;
    const bool dma = is_dma_queue(row.name);
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
      if (kernel->section) {
        add(graph_work[kernel->program >= 0 ? static_cast<uint32_t>(kernel->program)
                                            : empty_string]);
      }
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
  static const std::vector<std::string> order = {"TensorE", kLoadStationary, "VectorE",
                                                 "ScalarE", "GpSimdE",       kAllDma};
  auto rank = [](const std::string& e) -> std::pair<size_t, int64_t> {
    auto it = std::find(order.begin(), order.end(), e);
    if (it != order.end()) return {static_cast<size_t>(it - order.begin()), 0};
    const std::string q = e.size() > 5 ? e.substr(5) : "";
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

Summary SummaryBuilder::finish() {
  Impl& d = *impl_;
  Summary s;
  s.metadata = d.metadata.is_object() ? d.metadata : nlohmann::json::object();
  s.preset = s.metadata.contains("preset") && s.metadata["preset"].is_string()
                 ? s.metadata["preset"].get<std::string>()
                 : "";
  const uint64_t lo = d.lo, hi = d.hi;
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
    if (added) rows.push_back({std::move(process), std::move(name), kind, first, {}, {}, {}});
    Row& row = rows[it->second];
    auto move_into = [](auto& to, auto& from) {
      to.insert(to.end(), from.begin(), from.end());
      from.clear();
      from.shrink_to_fit();
    };
    move_into(row.instructions, t.instructions);
    move_into(row.kernels, t.kernels);
    move_into(row.ops, t.ops);
  }
  for (Row& row : rows) {
    sort_slices(row.instructions);
    sort_slices(row.kernels);
    sort_slices(row.ops);
  }
  add_engines(s, rows, hi - lo);
  add_kernels(s, rows, d.strings, d.id_of(""));
  add_ops(s, rows, d.strings);
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

Summary summarize(const Trace& t) {
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
  return b.finish();
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
  for (const char* k : {"overrides", "config", "peaks", "op_report"}) {
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
