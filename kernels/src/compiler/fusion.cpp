#include "neuronsim/kernels/compiler/fusion.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>

#include <fmt/format.h>

namespace neuronsim::kernels::compiler {

namespace {

bool compute_region(const Region& r) {
  return r.kind == Region::Kind::kTile || r.kind == Region::Kind::kMatmul;
}

class Partitioner {
 public:
  Partitioner(const LoweredGraph& g, const FusionOptions& opt) : g_(g), opt_(opt) {
    const size_t nv = g.graph.values().size();
    producer_.assign(nv, -1);
    consumers_.assign(nv, {});
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (op.kind == Op::Kind::kOpaque || op.kind == Op::Kind::kKernel) {
        for (int v : g.graph.nodes().at(static_cast<size_t>(op.node)).outputs) {
          if (v >= 0) producer_[static_cast<size_t>(v)] = static_cast<int>(i);
        }
      } else if (op.output >= 0) {
        producer_[static_cast<size_t>(op.output)] = static_cast<int>(i);
      }
      for (int v : op.inputs) consumers_.at(static_cast<size_t>(v)).push_back(static_cast<int>(i));
    }
  }

  Partition run() {
    region_of_.assign(g_.ops.size(), -1);
    int segment = 0;
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      const Op& op = g_.ops[i];
      const int oi = static_cast<int>(i);
      switch (op.kind) {
        case Op::Kind::kOpaque: {
          const Node& node = g_.graph.nodes().at(static_cast<size_t>(op.node));
          if (cpu_only(node)) break;  // host work on CPU tensors: no program, no sync
          const bool device = node.device_kernel;
          new_region(device ? Region::Kind::kEager : Region::Kind::kHost, oi, segment);
          if (!device) ++segment;
          break;
        }
        case Op::Kind::kMatmul:
          new_region(Region::Kind::kMatmul, oi, segment);
          break;
        case Op::Kind::kAttention:  // a program of its own; its output goes to HBM
          new_region(Region::Kind::kAttention, oi, segment);
          break;
        case Op::Kind::kKernel:  // its op-library program(s); its outputs go to HBM
          new_region(Region::Kind::kKernel, oi, segment);
          break;
        case Op::Kind::kView: {
          const int p = producer_.at(static_cast<size_t>(op.inputs.at(0)));
          const int r = p >= 0 ? region_of_.at(static_cast<size_t>(p)) : -1;
          if (r >= 0 && compute_region(regions_[static_cast<size_t>(r)]) &&
              regions_[static_cast<size_t>(r)].segment == segment && try_join(r, oi)) {
            break;
          }
          break;  // a view of HBM memory: no program
        }
        case Op::Kind::kPointwise:
        case Op::Kind::kReduce: {
          bool joined = false;
          const std::vector<int> cands = candidates(op);
          for (int r : cands) {
            if (regions_[static_cast<size_t>(r)].segment == segment && try_join(r, oi)) {
              joined = true;
              for (int h : cands) {
                if (h != r) try_merge(r, h);
              }
              break;
            }
          }
          if (!joined) {
            const int r = new_region(Region::Kind::kTile, oi, segment);
            std::string why;
            if (!feasible(regions_[static_cast<size_t>(r)].ops, &why)) {
              must_opaque_.emplace(op.node, why);
            }
          }
          break;
        }
      }
    }
    return finish(segment + 1);
  }

 private:
  int new_region(Region::Kind k, int op, int segment) {
    Region r;
    r.kind = k;
    r.ops = {op};
    r.segment = segment;
    regions_.push_back(r);
    const int id = static_cast<int>(regions_.size()) - 1;
    region_of_[static_cast<size_t>(op)] = id;
    deps_.emplace_back();
    add_deps(id, op);
    return id;
  }

  // An op on CPU tensors only (an optimizer's step arithmetic).
  bool cpu_only(const Node& n) const {
    bool any = false;
    auto check = [&](int v) {
      if (v < 0) return true;
      any = true;
      return !g_.graph.value(v).meta.on_device;
    };
    for (int v : n.outputs) {
      if (!check(v)) return false;
    }
    for (const auto& [name, a] : n.args) {
      if (a.kind == Arg::Kind::kTensor && !check(a.value)) return false;
      for (int v : a.values) {
        if (!check(v)) return false;
      }
    }
    return any;
  }

  // The op producing the memory `v` lives in (through views outside any region).
  int base_producer(int v) const {
    for (int guard = 0; guard < 10000; ++guard) {
      const int p = producer_.at(static_cast<size_t>(v));
      if (p < 0) return -1;
      const Op& op = g_.ops[static_cast<size_t>(p)];
      if (op.kind == Op::Kind::kView && region_of_.at(static_cast<size_t>(p)) < 0) {
        v = op.inputs.at(0);
        continue;
      }
      return p;
    }
    return -1;
  }

  void add_deps(int region, int op) {
    for (int v : g_.ops[static_cast<size_t>(op)].inputs) {
      const int p = base_producer(v);
      if (p < 0) continue;
      const int h = region_of_.at(static_cast<size_t>(p));
      if (h >= 0 && h != region) deps_[static_cast<size_t>(region)].insert(h);
    }
  }

  // Does region `from` depend, directly or not, on region `on`?
  bool reaches(int from, int on) const {
    std::vector<int> stack{from};
    std::set<int> seen;
    while (!stack.empty()) {
      const int r = stack.back();
      stack.pop_back();
      if (r == on) return true;
      if (!seen.insert(r).second) continue;
      for (int d : deps_[static_cast<size_t>(r)]) stack.push_back(d);
    }
    return false;
  }

  std::vector<int> candidates(const Op& op) const {
    std::set<int, std::greater<int>> rs;
    for (int v : op.inputs) {
      const int p = producer_.at(static_cast<size_t>(v));
      if (p < 0) continue;
      const int r = region_of_.at(static_cast<size_t>(p));
      if (r >= 0 && compute_region(regions_[static_cast<size_t>(r)])) rs.insert(r);
    }
    return {rs.begin(), rs.end()};
  }

  // Values of `ops` a region would store: used by anything outside them, or graph outputs.
  std::vector<int> stores_of(const std::vector<int>& ops) const {
    std::set<int> in(ops.begin(), ops.end());
    std::vector<int> out;
    for (int o : ops) {
      const Op& op = g_.ops[static_cast<size_t>(o)];
      const int v = op.output;
      if (v < 0) continue;
      // Graph outputs leave, and so do writes into a graph input's memory (a kept input
      // mutation: an in-place optimizer update's copy_ into its parameter, used by no one).
      const int root = g_.root.at(static_cast<size_t>(v));
      bool leaves = g_.graph.value(v).output || (root != v && g_.graph.value(root).input);
      for (int c : consumers_.at(static_cast<size_t>(v))) leaves |= !in.count(c);
      if (leaves) out.push_back(v);
    }
    return out;
  }

  bool feasible(const std::vector<int>& ops, std::string* why) const {
    // Temporaries of a composite op still being joined will find their consumers in the region
    // (finish() checks that they did).
    std::vector<int> stores;
    for (int v : stores_of(ops)) {
      if (!g_.graph.value(v).temporary) stores.push_back(v);
    }
    auto rs = build_region_spec(g_, ops, stores, why);
    if (!rs) return false;
    const TileProgramSpec& t = rs->tile;
    if (rs->matmul) {
      // Row reductions (softmax over the product's columns) need the whole row in one tile.
      if (TileEmitter::has_row_reduce(t) && t.shape.back() > 512) return false;
      const int64_t n = t.shape.back();
      const uint32_t need = static_cast<uint32_t>(std::min<int64_t>(n, 512));
      return TileEmitter::max_chunk(t, opt_.sbuf_window / 2) >= need;
    }
    const uint32_t chunk = TileEmitter::max_chunk(t, opt_.sbuf_window);
    if (chunk == 0) return false;
    if (TileEmitter::has_row_reduce(t) && chunk < t.shape.back()) return false;
    // Reductions over rows accumulate in PSUM, a bank per 512 fp32 columns of a chunk (chunks
    // taken one after another share them): a region that needs more banks than the core has
    // would not compile, and all its nodes would fall back to eager kernels; the reductions
    // then start regions of their own instead.
    if (opt_.psum_banks > 0 && TileEmitter::has_col_reduce(t)) {
      const int64_t bank_cols = static_cast<int64_t>(opt_.psum_bank_bytes / 4);
      const int64_t c = std::min<int64_t>(chunk, t.shape.back()),
                    pieces = (c + bank_cols - 1) / bank_cols;
      int64_t banks = 0;
      for (const TileInstr& in : t.instrs) {
        if (in.kind != TileInstr::Kind::kColReduce) continue;
        const bool full = t.instrs.at(static_cast<size_t>(in.src)).space == Space::kFull;
        banks += full ? pieces : 1;
      }
      if (banks > opt_.psum_banks) {
        if (why) *why = fmt::format("its reductions over rows need {} PSUM banks", banks);
        return false;
      }
    }
    return true;
  }

  bool try_join(int r, int op) {
    Region& g = regions_[static_cast<size_t>(r)];
    if (g.ops.size() >= opt_.max_ops_per_region) return false;
    for (int v : g_.ops[static_cast<size_t>(op)].inputs) {
      const int p = base_producer(v);
      if (p < 0) continue;
      const int h = region_of_.at(static_cast<size_t>(p));
      if (h >= 0 && h != r && reaches(h, r)) return false;  // would close a cycle
    }
    std::vector<int> ops = g.ops;
    ops.push_back(op);
    std::string why;
    if (!feasible(ops, &why)) return false;
    g.ops = std::move(ops);
    region_of_[static_cast<size_t>(op)] = r;
    add_deps(r, op);
    return true;
  }

  // Merges region h (one whose results region r reads) into r, when they fit one program and
  // no third region sits between them: a producer's values then stay on chip.
  bool try_merge(int r, int h) {
    Region& g = regions_[static_cast<size_t>(r)];
    Region& x = regions_[static_cast<size_t>(h)];
    if (x.ops.empty() || !compute_region(x) || x.segment != g.segment ||
        g.ops.size() + x.ops.size() > opt_.max_ops_per_region) {
      return false;
    }
    for (int k = 0; k < static_cast<int>(regions_.size()); ++k) {
      if (k == r || k == h || regions_[static_cast<size_t>(k)].ops.empty()) continue;
      if (reaches(r, k) && reaches(k, h)) return false;  // r -> k -> h: a cycle once merged
    }
    std::vector<int> ops = g.ops;
    ops.insert(ops.end(), x.ops.begin(), x.ops.end());
    std::sort(ops.begin(), ops.end());
    std::string why;
    if (!feasible(ops, &why)) return false;
    g.ops = std::move(ops);
    for (int o : x.ops) region_of_[static_cast<size_t>(o)] = r;
    x.ops.clear();
    for (int d : deps_[static_cast<size_t>(h)]) {
      if (d != r) deps_[static_cast<size_t>(r)].insert(d);
    }
    deps_[static_cast<size_t>(r)].erase(h);
    deps_[static_cast<size_t>(h)].clear();
    for (auto& d : deps_) {
      if (d.erase(h)) d.insert(r);
    }
    for (auto& d : deps_) d.erase(-1);
    deps_[static_cast<size_t>(r)].erase(r);
    return true;
  }

  Partition finish(int segments) {
    Partition p;
    p.segments = segments;
    // Regions merged into others are gone: renumber the rest.
    {
      std::vector<int> id(regions_.size(), -1);
      std::vector<Region> kept;
      for (size_t r = 0; r < regions_.size(); ++r) {
        if (regions_[r].ops.empty()) continue;
        id[r] = static_cast<int>(kept.size());
        kept.push_back(std::move(regions_[r]));
      }
      regions_ = std::move(kept);
      for (int& r : region_of_) r = r < 0 ? -1 : id[static_cast<size_t>(r)];
    }
    const size_t nv = g_.graph.values().size();
    // Final dependencies and what leaves each region.
    std::vector<std::set<int>> deps(regions_.size());
    for (size_t r = 0; r < regions_.size(); ++r) {
      for (int op : regions_[r].ops) {
        for (int v : g_.ops[static_cast<size_t>(op)].inputs) {
          const int bp = base_producer(v);
          if (bp < 0) continue;
          const int h = region_of_.at(static_cast<size_t>(bp));
          if (h >= 0 && h != static_cast<int>(r)) deps[r].insert(h);
        }
      }
    }
    // Launch order: by segment, host regions last in theirs, then dependencies, then first op.
    std::vector<int> order;
    std::vector<int> indeg(regions_.size(), 0);
    std::vector<std::vector<int>> users(regions_.size());
    for (size_t r = 0; r < regions_.size(); ++r) {
      for (int d : deps[r]) {
        ++indeg[r];
        users[static_cast<size_t>(d)].push_back(static_cast<int>(r));
      }
    }
    auto key = [&](int r) {
      const Region& x = regions_[static_cast<size_t>(r)];
      return std::make_tuple(x.segment, x.kind == Region::Kind::kHost ? 1 : 0, x.ops.front());
    };
    auto later = [&](int a, int b) { return key(a) > key(b); };
    std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
    for (size_t r = 0; r < regions_.size(); ++r) {
      if (indeg[r] == 0) ready.push(static_cast<int>(r));
    }
    while (!ready.empty()) {
      const int r = ready.top();
      ready.pop();
      order.push_back(r);
      for (int u : users[static_cast<size_t>(r)]) {
        if (--indeg[static_cast<size_t>(u)] == 0) ready.push(u);
      }
    }
    std::vector<int> new_id(regions_.size(), -1);
    for (size_t i = 0; i < order.size(); ++i)
      new_id[static_cast<size_t>(order[i])] = static_cast<int>(i);
    for (int r : order) {
      Region x = regions_[static_cast<size_t>(r)];
      x.deps.clear();
      for (int d : deps[static_cast<size_t>(r)]) x.deps.push_back(new_id[static_cast<size_t>(d)]);
      std::sort(x.deps.begin(), x.deps.end());
      p.regions.push_back(std::move(x));
    }
    p.region_of_op.resize(region_of_.size());
    for (size_t i = 0; i < region_of_.size(); ++i) {
      p.region_of_op[i] = region_of_[i] < 0 ? -1 : new_id[static_cast<size_t>(region_of_[i])];
    }
    p.stored_by.assign(nv, -1);
    for (size_t r = 0; r < p.regions.size(); ++r) {
      const Region& x = p.regions[r];
      if (!compute_region(x)) {
        for (int v : g_.graph.nodes()
                         .at(static_cast<size_t>(g_.ops[static_cast<size_t>(x.ops[0])].node))
                         .outputs) {
          if (v >= 0) p.stored_by[static_cast<size_t>(v)] = static_cast<int>(r);
        }
        continue;
      }
      for (int v : stores_of(x.ops)) {
        p.stored_by[static_cast<size_t>(v)] = static_cast<int>(r);
        if (g_.graph.value(v).temporary) {
          must_opaque_.emplace(
              g_.ops[static_cast<size_t>(producer_[static_cast<size_t>(v)])].node,
              "its parts (" + g_.graph.value(v).name + ") do not share one fused region");
        }
      }
    }
    p.must_be_opaque.assign(must_opaque_.begin(), must_opaque_.end());
    return p;
  }

  const LoweredGraph& g_;
  const FusionOptions& opt_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> consumers_;
  std::vector<Region> regions_;
  std::vector<std::set<int>> deps_;
  std::vector<int> region_of_;
  std::map<int, std::string> must_opaque_;
};

}  // namespace

Partition partition(const LoweredGraph& g, const FusionOptions& opt) {
  return Partitioner(g, opt).run();
}

std::string region_label(const LoweredGraph& g, const Region& r) {
  std::vector<std::string> names;
  int last_node = -1;
  for (int o : r.ops) {
    const Op& op = g.ops[static_cast<size_t>(o)];
    if (op.kind == Op::Kind::kView || op.node == last_node) continue;
    last_node = op.node;
    std::string n = g.graph.nodes().at(static_cast<size_t>(op.node)).op;
    if (n.rfind("aten::", 0) == 0) n = n.substr(6);
    if (op.kind == Op::Kind::kAttention) n = "flash_attention";
    if (names.empty() || names.back() != n) names.push_back(n);
  }
  std::string s;
  for (size_t i = 0; i < names.size() && i < 6; ++i) s += (i ? "+" : "") + names[i];
  if (names.size() > 6) s += fmt::format("+{} more", names.size() - 6);
  return s.empty() ? "view" : s;
}

}  // namespace neuronsim::kernels::compiler
