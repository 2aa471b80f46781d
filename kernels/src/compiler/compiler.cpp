#include "neuronsim/kernels/compiler/compiler.h"

#include "graph_op_call.h"
#include "neuronsim/kernels/compiler/attention_region.h"
#include "neuronsim/kernels/compiler/group_program.h"
#include "neuronsim/kernels/compiler/program_bound.h"
#include "neuronsim/kernels/ops/op_rule.h"
#include "neuronsim/kernels/ops/tensor_values.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/ranges.h>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::kernels::compiler {

const char* node_class_name(NodeClass c) {
  switch (c) {
    case NodeClass::kFused:
      return "fused";
    case NodeClass::kView:
      return "view";
    case NodeClass::kKernel:
      return "kernel";
    case NodeClass::kEager:
      return "eager";
    case NodeClass::kNative:
      return "native";
    case NodeClass::kHost:
      return "host";
    case NodeClass::kCpu:
      return "cpu";
  }
  return "?";
}

bool data_dependent_op(const std::string& op) {
  static const std::set<std::string> ops = {"aten::embedding",     "aten::embedding_dense_backward",
                                            "aten::index_select",  "aten::gather",
                                            "aten::index",         "aten::index_put",
                                            "aten::index_add",     "aten::index_copy",
                                            "aten::scatter",       "aten::scatter_add",
                                            "aten::scatter_reduce"};
  return ops.count(op) > 0;
}

device_model::CoreParams window_params(const device_model::CoreParams& core, uint32_t num,
                                       uint32_t den) {
  device_model::CoreParams w = core;
  w.sbuf.partition_bytes = core.sbuf.partition_bytes * num / den / 64 * 64;
  w.psum.banks = core.psum.banks * num / den;
  w.psum.partition_bytes = core.psum.bank_bytes() * w.psum.banks;
  return w;
}

namespace {

struct EmitFailure {
  int region;
  std::string why;
};

// The emitter input of region r; throws std::invalid_argument.
RegionSpec spec_of(const LoweredGraph& g, const Partition& p, int r, const std::string& name) {
  const Region& region = p.regions[static_cast<size_t>(r)];
  std::vector<int> stores;
  for (size_t v = 0; v < p.stored_by.size(); ++v) {
    if (p.stored_by[v] == r) stores.push_back(static_cast<int>(v));
  }
  std::string why;
  auto spec = build_region_spec(g, region.ops, stores, &why);
  if (!spec) throw std::invalid_argument(why);
  spec->tile.name = name;
  spec->mm.name = name;
  spec->mm.epilogue.name = name;
  if (std::getenv("NEURONSIM_COMPILE_DEBUG")) {
    std::string s = fmt::format("{}: shape [{}]\n", name, fmt::join(spec->tile.shape, ","));
    for (const auto& o : spec->tile.operands) {
      s += fmt::format("  {} {} strides [{}]\n", g.graph.value(o.value).name, space_name(o.space),
                       fmt::join(o.strides, ","));
    }
    if (spec->matmul) {
      s += fmt::format("  mm batch [{}] m {} k {} n {} a {} ({},{}) b {} ({},{})\n",
                       fmt::join(spec->mm.batch, ","), spec->mm.m, spec->mm.k, spec->mm.n,
                       g.graph.value(spec->mm.a.value).name, spec->mm.a.row_stride,
                       spec->mm.a.col_stride, g.graph.value(spec->mm.b.value).name,
                       spec->mm.b.row_stride, spec->mm.b.col_stride);
    }
    std::fputs(s.c_str(), stderr);
  }
  return std::move(*spec);
}

// One region's program against `core`; throws std::length_error / std::invalid_argument.
device_model::Program emit(const RegionSpec& spec, const device_model::CoreParams& core) {
  if (spec.matmul) return build_matmul_region(spec.mm, core);
  // Elementwise regions over contiguous tensors tile flat with loads spread over queues; the
  // library's elementwise kernel folds other layouts well (and transposes on TensorE).
  if (!tile_program_is_flat(spec.tile, core) && !tile_program_transposes(spec.tile, core)) {
    if (auto p = build_pointwise_program(spec.tile, core)) return std::move(*p);
  }
  return build_tile_program(spec.tile, core);
}

// A node compiled as its op-library program(s) (Op::Kind::kKernel).
struct KernelBuild {
  std::vector<device_model::Program> programs;
  bool whole_core = false;  // did not fit a half window
};

// Builds node n's programs against a half window (else the whole core). Nullopt, with the
// reason, when the rule does not take the node's arguments or needs tensor values.
std::optional<KernelBuild> build_kernel_node(const Graph& g, int n,
                                             const device_model::CoreParams& half,
                                             const device_model::CoreParams& core, std::string* why,
                                             bool* needs_values) {
  const Node& node = g.nodes().at(static_cast<size_t>(n));
  const ops::OpRule* rule = ops::find_op_rule(node.op);
  if (!rule || !rule->build) {
    *why = "no op-library program for " + node.op;
    return std::nullopt;
  }
  try {
    for (const auto* params : {&half, &core}) {
      const GraphOpCall call(g, node, *params);
      if (rule->supports && !rule->supports(call)) {
        *why = "the op's rule does not take these arguments: its eager kernel runs it";
        return std::nullopt;
      }
      try {
        KernelBuild k;
        k.programs = rule->build(call);
        k.whole_core = params == &core;
        return k;
      } catch (const std::length_error&) {
        if (params == &core) throw;
      }
    }
  } catch (const ops::ValuesRequired& e) {
    *needs_values = true;
    *why = e.what();
  } catch (const std::exception& e) {
    *why = std::string("its op-library program did not build: ") + e.what();
  }
  return std::nullopt;
}

// The library's program for a matmul region's product node, when the cost model bounds it plus
// the rest of the region (as a tile region reading the product from HBM) below the fused region
// (`fused`, already emitted): the reason to keep the node whole, else empty. The fused region
// saves the product's trip through HBM; the library's matmul pipelines its loads, transposes and
// PSUM evacuations better (transposes batched per PSUM bank, evacuations shared by VectorE and
// ScalarE), which for a small product with natural operands outweighs that.
std::string library_matmul_choice(const CompiledGraph& cg, const Graph& g, int r,
                                  const device_model::Program& fused,
                                  const device_model::CoreParams& half,
                                  const device_model::CoreParams& core,
                                  std::map<int, KernelBuild>* kernel_builds) {
  const Partition& p = cg.partition;
  const Region& region = p.regions.at(static_cast<size_t>(r));
  const Op& mm = cg.lowered.ops.at(static_cast<size_t>(region.ops.at(0)));
  if (mm.kind != Op::Kind::kMatmul || mm.node < 0) return "";
  const Node& node = g.nodes().at(static_cast<size_t>(mm.node));
  const ops::OpRule* rule = ops::find_op_rule(node.op);
  if (!rule || !rule->build || !node.device_kernel || rule->backend_values || rule->shape_sync)
    return "";
  std::string why;
  bool values = false;
  // Against the whole core, as eager mode runs it: the kernel's pipeline depth comes from the
  // PSUM banks, which a half window halves (the linker makes neighbours wait for the memory).
  auto kernel = build_kernel_node(g, mm.node, core, core, &why, &values);
  if (!kernel) {
    if (std::getenv("NEURONSIM_COMPILE_DEBUG"))
      std::fputs(fmt::format("{}: no library program: {}\n",
                             cg.region_name.at(static_cast<size_t>(r)), why)
                     .c_str(),
                 stderr);
    return "";
  }
  std::vector<ProgramBound> split;
  for (const auto& prog : kernel->programs) split.push_back(program_bound(prog, core));
  // The rest of the region: its ops of other nodes, reading the node's outputs from HBM. Views
  // of what the rest does not compute stay outside it (views of HBM memory, as the partitioner
  // leaves them).
  std::vector<int> rest;
  std::set<int> computed;
  for (int o : region.ops) {
    const Op& op = cg.lowered.ops.at(static_cast<size_t>(o));
    if (op.node == mm.node) continue;
    if (op.kind == Op::Kind::kView && !computed.count(op.inputs.at(0))) continue;
    rest.push_back(o);
    if (op.output >= 0) computed.insert(op.output);
  }
  const std::set<int> outs(node.outputs.begin(), node.outputs.end());
  std::vector<int> stores;
  for (size_t v = 0; v < p.stored_by.size(); ++v) {
    if (p.stored_by[v] == r && !outs.count(static_cast<int>(v)))
      stores.push_back(static_cast<int>(v));
  }
  if (!rest.empty()) {
    std::string rest_why;
    auto spec = build_region_spec(cg.lowered, rest, stores, &rest_why);
    if (!spec || spec->matmul) {
      if (std::getenv("NEURONSIM_COMPILE_DEBUG"))
        std::fputs(fmt::format("{}: the rest is no tile region: {}\n",
                               cg.region_name.at(static_cast<size_t>(r)), rest_why)
                       .c_str(),
                   stderr);
      return "";
    }
    spec->tile.name = cg.region_name.at(static_cast<size_t>(r)) + " (epilogue)";
    try {
      try {
        split.push_back(program_bound(emit(*spec, half), core));
      } catch (const std::length_error&) {
        split.push_back(program_bound(emit(*spec, core), core));
      }
    } catch (const std::exception&) {
      return "";
    }
  }
  // The rest reads what the library's matmul stores, so it runs after it (the linker makes a
  // region wait for the HBM its predecessor writes): their bounds add.
  const ProgramBound f = program_bound(fused, core);
  double split_s = 0;
  std::string split_by;
  for (const ProgramBound& b : split) {
    split_s += b.seconds;
    split_by += (split_by.empty() ? "" : " + ") + b.resource;
  }
  if (std::getenv("NEURONSIM_COMPILE_DEBUG")) {
    std::fputs(
        fmt::format("{}: fused bound {:.2f} us ({}), library {} and the rest {:.2f} us ({})\n",
                    cg.region_name.at(static_cast<size_t>(r)), f.seconds * 1e6, f.resource, node.op,
                    split_s * 1e6, split_by)
            .c_str(),
        stderr);
  }
  // On a tie the model cannot tell them apart: the library's matmul, eager mode's kernel.
  if (split_s > f.seconds) return "";
  kernel_builds->emplace(mm.node, std::move(*kernel));
  return fmt::format(
      "the library's matmul, as the cost model bounds it and the rest of its fused region at "
      "{:.1f} us ({}) against {:.1f} us for the fused region ({})",
      split_s * 1e6, split_by, f.seconds * 1e6, f.resource);
}

std::string nodes_of(const LoweredGraph& g, const Region& r, std::vector<int>* nodes) {
  std::string s;
  std::set<int> seen;
  for (int o : r.ops) {
    const int n = g.ops[static_cast<size_t>(o)].node;
    if (!seen.insert(n).second) continue;
    nodes->push_back(n);
    s += (s.empty() ? "" : ", ") + g.graph.nodes().at(static_cast<size_t>(n)).name;
  }
  return s;
}

}  // namespace

CompiledGraph compile_graph(const Graph& g, const device_model::CoreParams& core,
                            const CompileOptions& opt) {
  for (const Node& n : g.nodes()) {
    for (int v : n.outputs) {
      if (v >= static_cast<int>(g.values().size())) {
        throw std::invalid_argument(fmt::format("node {} returns unknown value {}", n.name, v));
      }
    }
  }
  const device_model::CoreParams half = window_params(core, 1, 2);
  FusionOptions fo;
  fo.sbuf_window = half.sbuf.partition_bytes;
  fo.psum_banks = core.psum.banks;
  fo.psum_bank_bytes = core.psum.bank_bytes();
  fo.max_ops_per_region = opt.max_ops_per_region;
  std::vector<bool> opaque(g.nodes().size(), false);
  std::vector<std::string> forced_reason(g.nodes().size());
  // Nodes compiled as their op-library programs, built once (programs depend on the node, not
  // on the partition); those whose rule needs tensor values are the data-dependent ones.
  std::map<int, KernelBuild> kernel_builds;
  std::vector<bool> needs_values(g.nodes().size(), false);
  // Matmul nodes kept whole as the library's matmul (the cost model's choice), with the reason;
  // the choice is made once per node, the first time its fused region is emitted.
  std::vector<std::string> library_matmul(g.nodes().size());
  std::set<int> matmul_chosen;
  CompiledGraph cg;
  cg.name = opt.name;
  for (int attempt = 1;; ++attempt) {
    if (attempt > static_cast<int>(g.nodes().size()) + 2) {
      throw std::logic_error(opt.name + ": the fusion pass did not converge");
    }
    cg.attempts = attempt;
    cg.lowered = lower(g, opaque, library_matmul);
    bool kernels_failed = false;
    for (const Op& op : cg.lowered.ops) {
      if (op.kind != Op::Kind::kKernel || kernel_builds.count(op.node)) continue;
      std::string why;
      bool values = false;
      if (auto k = build_kernel_node(g, op.node, half, core, &why, &values)) {
        kernel_builds.emplace(op.node, std::move(*k));
      } else {
        opaque[static_cast<size_t>(op.node)] = true;
        forced_reason[static_cast<size_t>(op.node)] = why;
        needs_values[static_cast<size_t>(op.node)] = values;
        kernels_failed = true;
      }
    }
    if (kernels_failed) continue;  // lower again with those nodes opaque
    cg.partition = partition(cg.lowered, fo);
    if (!cg.partition.must_be_opaque.empty()) {
      for (const auto& [n, why] : cg.partition.must_be_opaque) {
        opaque[static_cast<size_t>(n)] = true;
        forced_reason[static_cast<size_t>(n)] = why;
      }
      continue;
    }
    // Emit every compute region: half windows alternating, the whole core when it needs it.
    // Consecutive alike flat regions (an optimizer's per-parameter updates) share one program.
    const Partition& p = cg.partition;
    cg.region_name.assign(p.regions.size(), "");
    cg.region_nodes.assign(p.regions.size(), {});
    std::vector<std::string> details(p.regions.size());
    std::vector<std::optional<RegionSpec>> specs(p.regions.size());
    std::optional<EmitFailure> failure;
    for (size_t r = 0; r < p.regions.size() && !failure; ++r) {
      const Region& region = p.regions[r];
      cg.region_name[r] = fmt::format("{}.r{} {}", opt.name, r, region_label(cg.lowered, region));
      details[r] = nodes_of(cg.lowered, region, &cg.region_nodes[r]);
      if (region.kind != Region::Kind::kTile && region.kind != Region::Kind::kMatmul) continue;
      try {
        specs[r] = spec_of(cg.lowered, p, static_cast<int>(r), cg.region_name[r]);
      } catch (const std::exception& e) {
        failure = EmitFailure{static_cast<int>(r), e.what()};
      }
    }
    struct Unit {
      std::vector<size_t> regions;
      Part part;
    };
    std::vector<Unit> units;
    // Groups of alike flat regions (an optimizer's per-parameter updates), independent of each
    // other. Regions between members that need no member run first, so members interleaved
    // with other regions (each update after its own step-count arithmetic) still group; the
    // group runs where its last member was.
    std::vector<bool> grouped(p.regions.size(), false);
    std::map<size_t, std::vector<size_t>> group_at;  // last member -> members
    auto root_of = [&](int v) { return cg.lowered.root.at(static_cast<size_t>(v)); };
    auto groupable = [&](size_t r) {
      return specs[r] && !specs[r]->matmul && tile_program_is_flat(specs[r]->tile, half);
    };
    for (size_t r = 0; r < p.regions.size(); ++r) {
      if (grouped[r] || !groupable(r)) continue;
      std::set<size_t> members{r};
      std::vector<size_t> order{r};
      std::set<int> member_reads;
      for (int v : specs[r]->loads) member_reads.insert(root_of(v));
      for (size_t j = r + 1; j < p.regions.size(); ++j) {
        if (p.regions[j].segment != p.regions[r].segment) break;
        if (!specs[j]) break;  // eager or host: not analysed, members do not pass it
        if (std::any_of(p.regions[j].deps.begin(), p.regions[j].deps.end(),
                        [&](int d) { return members.count(static_cast<size_t>(d)) > 0; }))
          break;  // it needs a member: members cannot wait past it
        if (!grouped[j] && groupable(j) && same_structure(specs[j]->tile, specs[r]->tile)) {
          members.insert(j);
          order.push_back(j);
          for (int v : specs[j]->loads) member_reads.insert(root_of(v));
          continue;
        }
        // Members wait past it: it must not overwrite what they read.
        if (std::any_of(specs[j]->stores.begin(), specs[j]->stores.end(),
                        [&](int v) { return member_reads.count(root_of(v)) > 0; }))
          break;
      }
      if (order.size() < 2) continue;
      for (size_t m : order) grouped[m] = true;
      group_at[order.back()] = order;
    }
    int window = 0;
    for (size_t rr = 0; rr < p.regions.size() && !failure; ++rr) {
      if (grouped[rr] && !group_at.count(rr)) continue;  // runs with its group
      const size_t r = group_at.count(rr) ? group_at[rr].front() : rr;
      const Region& region = p.regions[r];
      Unit u;
      u.regions = group_at.count(rr) ? group_at[rr] : std::vector<size_t>{r};
      Part& part = u.part;
      part.name = cg.region_name[r];
      part.detail = details[r];
      if (region.kind == Region::Kind::kAttention) {
        const Op& op = cg.lowered.ops.at(static_cast<size_t>(region.ops.at(0)));
        try {
          try {
            part.program = build_attention_region(cg.lowered, op, part.name, half);
            part.sbuf_base = window * half.sbuf.partition_bytes;
            part.psum_base = window * half.psum.partition_bytes;
            window ^= 1;
          } catch (const std::length_error&) {
            part.program = build_attention_region(cg.lowered, op, part.name, core);
          }
        } catch (const std::exception& e) {
          failure = EmitFailure{static_cast<int>(r), e.what()};
        }
        part.program.name = part.name;
        units.push_back(std::move(u));
        continue;
      }
      if (region.kind == Region::Kind::kKernel) {
        const int node = cg.lowered.ops.at(static_cast<size_t>(region.ops.at(0))).node;
        const KernelBuild& k = kernel_builds.at(node);
        for (size_t i = 0; i < k.programs.size(); ++i) {
          Unit ku = u;
          ku.part.program = k.programs[i];
          if (k.programs.size() > 1)
            ku.part.name += fmt::format(" ({}/{})", i + 1, k.programs.size());
          if (!k.whole_core) {
            ku.part.sbuf_base = window * half.sbuf.partition_bytes;
            ku.part.psum_base = window * half.psum.partition_bytes;
            window ^= 1;
          }
          ku.part.program.name = ku.part.name;
          units.push_back(std::move(ku));
        }
        continue;
      }
      if (!specs[r]) {  // eager or host: placeholders
        part.barrier = true;
        units.push_back(std::move(u));
        continue;
      }
      try {
        if (u.regions.size() > 1) {
          std::vector<TileProgramSpec> group;
          for (size_t m : u.regions) {
            group.push_back(specs[m]->tile);
            if (m != r) part.detail += ", " + details[m];
          }
          part.name = fmt::format("{}.r{}-r{} {} (x{})", opt.name, r, u.regions.back(),
                                  region_label(cg.lowered, region), u.regions.size());
          // The multi-tensor kernel of eager mode's fused optimizers when the regions have its
          // form, else one tile pipeline.
          const std::vector<TileProgramSpec> flat = flatten_group(part.name, group, half);
          if (auto mt = build_group_multi_tensor(part.name, flat, half)) {
            part.program = std::move(*mt);
          } else {
            part.program = build_tile_program_group(part.name, flat, half);
          }
        } else {
          part.program = emit(*specs[r], half);
        }
        part.sbuf_base = window * half.sbuf.partition_bytes;
        part.psum_base = window * half.psum.partition_bytes;
        window ^= 1;
      } catch (const std::length_error&) {
        try {
          if (u.regions.size() > 1) throw std::length_error("group too large");
          part.program = emit(*specs[r], core);
        } catch (const std::exception& e) {
          failure = EmitFailure{static_cast<int>(r), e.what()};
        }
      } catch (const std::exception& e) {
        failure = EmitFailure{static_cast<int>(r), e.what()};
      }
      part.program.name = part.name;
      units.push_back(std::move(u));
    }
    if (failure) {
      // Its nodes run with their eager kernels instead.
      for (int n : cg.region_nodes[static_cast<size_t>(failure->region)]) {
        opaque[static_cast<size_t>(n)] = true;
        forced_reason[static_cast<size_t>(n)] = "its fused region did not compile: " + failure->why;
      }
      continue;
    }
    // The fused matmul regions against the library's matmul (a node whose choice flips is
    // lowered whole and the graph partitioned again).
    bool chose_library = false;
    for (const Unit& u : units) {
      const size_t r = u.regions[0];
      if (!opt.library_matmuls || u.regions.size() != 1 ||
          p.regions[r].kind != Region::Kind::kMatmul)
        continue;
      const int node = cg.lowered.ops.at(static_cast<size_t>(p.regions[r].ops.at(0))).node;
      if (!matmul_chosen.insert(node).second) continue;
      std::string why = library_matmul_choice(cg, g, static_cast<int>(r), u.part.program, half,
                                              core, &kernel_builds);
      if (!why.empty()) {
        library_matmul[static_cast<size_t>(node)] = std::move(why);
        chose_library = true;
      }
    }
    if (chose_library) continue;
    // Segments: split at host regions.
    cg.segments.assign(static_cast<size_t>(p.segments), Segment{});
    for (Unit& u : units) {
      const Region& region = p.regions[u.regions[0]];
      Segment& seg = cg.segments.at(static_cast<size_t>(region.segment));
      if (region.kind == Region::Kind::kHost) {
        seg.host_node = cg.lowered.ops.at(static_cast<size_t>(region.ops[0])).node;
        continue;
      }
      seg.eager_node.push_back(region.kind == Region::Kind::kEager
                                   ? cg.lowered.ops.at(static_cast<size_t>(region.ops[0])).node
                                   : -1);
      cg.instructions += u.part.program.instruction_count();
      seg.parts.push_back(std::move(u.part));
    }
    for (Segment& seg : cg.segments) {
      const bool eager =
          std::any_of(seg.eager_node.begin(), seg.eager_node.end(), [](int n) { return n >= 0; });
      // The values every part addresses: link once to find them (and keep the result when
      // nothing is spliced in at run time).
      LinkedProgram l = link(cg.name, seg.parts, cg.lowered.root, core);
      std::set<int> vs;
      for (const Relocation& rel : l.relocations) vs.insert(rel.value);
      seg.values.assign(vs.begin(), vs.end());
      if (!eager) {
        seg.linked = std::move(l);
        seg.prelinked = true;
      }
    }
    break;
  }
  // Per node: how it runs.
  const size_t nn = g.nodes().size();
  cg.node_class.assign(nn, NodeClass::kView);
  cg.node_region.assign(nn, -1);
  cg.node_reason.assign(nn, "");
  for (size_t i = 0; i < cg.lowered.ops.size(); ++i) {
    const Op& op = cg.lowered.ops[i];
    const size_t n = static_cast<size_t>(op.node);
    const int r = cg.partition.region_of_op[i];
    if (op.kind == Op::Kind::kKernel) {
      cg.node_class[n] = NodeClass::kKernel;
      cg.node_region[n] = r;
      cg.node_reason[n] =
          "its op-library program inside the launch, built at compile time (" + op.reason + ")";
    } else if (op.kind == Op::Kind::kOpaque && r < 0) {
      cg.node_class[n] = NodeClass::kCpu;
    } else if (op.kind == Op::Kind::kOpaque) {
      const Node& node = g.nodes()[n];
      const bool native =
          node.device_kernel &&
          (needs_values[n] || (forced_reason[n].empty() && data_dependent_op(node.op)));
      cg.node_class[n] = native               ? NodeClass::kNative
                         : node.device_kernel ? NodeClass::kEager
                                              : NodeClass::kHost;
      cg.node_region[n] = r;
      cg.node_reason[n] =
          native ? "data-dependent addressing: its device kernel, with DMA descriptors from "
                   "the indices, runs inside the launch"
                 : (forced_reason[n].empty() ? op.reason : forced_reason[n]);
    } else if (op.kind != Op::Kind::kView || r >= 0) {
      if (op.kind != Op::Kind::kView) cg.node_class[n] = NodeClass::kFused;
      if (cg.node_region[n] < 0) cg.node_region[n] = r;
    }
  }
  return cg;
}

}  // namespace neuronsim::kernels::compiler
