// The graph compiler (kernels/graph): ATen-level graphs are lowered, fused into regions, emitted
// and linked into one program per segment, which runs in full mode on a simulated core and must
// compute what the graph means (host references in double precision).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "neuronsim/device_model/dtype.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/kernels/compiler/compiler.h"
#include "neuronsim/kernels/program_builder.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using kernels::compiler::CompiledGraph;
using kernels::compiler::NodeClass;
using kernels::graph::Arg;
using kernels::graph::Graph;
using kernels::graph::Node;
using kernels::graph::TensorMeta;

TensorMeta meta(std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                const std::string& type = "float32") {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = strides.empty() ? kernels::graph::contiguous_strides(m.sizes) : std::move(strides);
  m.type_name = type;
  m.dtype = type == "bfloat16" ? device_model::DType::kBf16
            : type == "bool"   ? device_model::DType::kUint8
                               : device_model::DType::kFp32;
  return m;
}

// A graph under construction with device memory for its values.
class GraphHarness {
 public:
  GraphHarness() : dev_(testing::make_device()) {}

  const device_model::CoreParams& core() const { return dev_->params().core; }
  Graph& graph() { return g_; }

  int input(const std::string& name, std::vector<int64_t> sizes, float stddev = 1.0f) {
    const int v = g_.add_value(meta(std::move(sizes)), name);
    g_.add_input(v);
    allocate(v);
    std::normal_distribution<float> d(0.0f, stddev);
    for (uint64_t i = 0; i < g_.value(v).meta.numel(); ++i) at(v, i) = d(rng_);
    return v;
  }
  /// A node with one result; `alias` names the value a view result shares memory with.
  int node(const std::string& name, const std::string& op,
           std::vector<std::pair<std::string, Arg>> args, TensorMeta out, int alias = -1,
           bool device_kernel = true) {
    const int v = g_.add_value(std::move(out), name);
    Node n;
    n.name = name;
    n.op = op;
    n.overload = "default";
    n.args = std::move(args);
    n.outputs = {v};
    n.device_kernel = device_kernel;
    g_.add_node(std::move(n));
    if (alias >= 0) {
      address_[v] = address_.at(alias);
    } else {
      allocate(v);
    }
    return v;
  }
  int multi(const std::string& name, const std::string& op,
            std::vector<std::pair<std::string, Arg>> args, std::vector<TensorMeta> outs) {
    Node n;
    n.name = name;
    n.op = op;
    n.overload = "default";
    n.args = std::move(args);
    for (size_t i = 0; i < outs.size(); ++i) {
      const int v = g_.add_value(outs[i], name + "." + std::to_string(i));
      n.outputs.push_back(v);
      allocate(v);
    }
    const int first = n.outputs[0];
    g_.add_node(std::move(n));
    return first;
  }

  /// Element i (row-major over the value's sizes) of an fp32 value.
  float& at(int v, uint64_t i) {
    const TensorMeta& m = g_.value(v).meta;
    uint64_t off = 0, rem = i;
    for (size_t d = m.sizes.size(); d-- > 0;) {
      off += (rem % static_cast<uint64_t>(m.sizes[d])) * static_cast<uint64_t>(m.strides[d]);
      rem /= static_cast<uint64_t>(m.sizes[d]);
    }
    return *reinterpret_cast<float*>(dev_->hbm_data() + address_.at(v) + off * 4);
  }

  CompiledGraph compile(bool library_matmuls = true) {
    return kernels::compiler::compile_graph(g_, core(), {"test", 64, library_matmuls});
  }
  /// Runs every segment of the compiled graph (no eager nodes) in full mode.
  device_model::RunResult run(CompiledGraph& cg) {
    std::vector<uint64_t> addr(g_.values().size(), kernels::compiler::kNoAddress);
    for (const auto& [v, a] : address_) addr[static_cast<size_t>(v)] = a;
    device_model::RunResult last;
    for (auto& seg : cg.segments) {
      EXPECT_TRUE(seg.prelinked);
      kernels::compiler::relocate(seg.linked, addr);
      last = dev_->run(0, seg.linked.program);
    }
    return last;
  }

 private:
  void allocate(int v) {
    const uint64_t bytes = std::max<uint64_t>(g_.value(v).meta.numel(), 1) * 4;
    address_[v] = next_;
    next_ += (bytes + 4095) / 4096 * 4096;
  }
  std::unique_ptr<device_model::Device> dev_;
  Graph g_;
  std::map<int, uint64_t> address_;
  uint64_t next_ = 1 << 20;
  std::mt19937 rng_{7};
};

Arg T(int v) {
  return Arg::tensor(v);
}

double gelu(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

TEST(GraphCompiler, LinearBiasGeluIsOneMatmulRegionWithItsEpilogue) {
  GraphHarness h;
  const int64_t M = 200, K = 96, N = 136;
  const int x = h.input("x", {M, K});
  const int w = h.input("w", {N, K}, 0.1f);
  const int b = h.input("b", {N});
  const int wt = h.node("t", "aten::t", {{"self", T(w)}}, meta({K, N}, {1, K}), w);
  const int mm = h.node("addmm", "aten::addmm",
                        {{"self", T(b)},
                         {"mat1", T(x)},
                         {"mat2", T(wt)},
                         {"beta", Arg::integer(1)},
                         {"alpha", Arg::integer(1)}},
                        meta({M, N}));
  const int y = h.node("gelu", "aten::gelu",
                       {{"self", T(mm)}, {"approximate", Arg::string("none")}}, meta({M, N}));
  h.graph().add_output(y);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.segments.size(), 1u);
  ASSERT_EQ(cg.partition.regions.size(), 1u);
  EXPECT_EQ(cg.node_class[1], NodeClass::kFused);
  EXPECT_EQ(cg.node_class[2], NodeClass::kFused);
  h.run(cg);
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = h.at(b, static_cast<uint64_t>(n));
      for (int64_t k = 0; k < K; ++k) {
        acc += double(h.at(x, static_cast<uint64_t>(m * K + k))) *
               h.at(w, static_cast<uint64_t>(n * K + k));
      }
      worst = std::max(worst, std::abs(gelu(acc) - h.at(y, static_cast<uint64_t>(m * N + n))));
    }
  }
  EXPECT_LT(worst, 1e-4);
  // The pre-activation is not stored: nothing outside the region uses it.
  EXPECT_EQ(cg.partition.stored_by[static_cast<size_t>(mm)], -1);
}

TEST(GraphCompiler, SoftmaxFusesWithItsProducerAndConsumer) {
  GraphHarness h;
  const int64_t R = 300, C = 80;
  const int x = h.input("x", {3, 100, C});
  const int s =
      h.node("mul", "aten::mul", {{"self", T(x)}, {"other", Arg::number(0.5)}}, meta({3, 100, C}));
  const int p =
      h.node("softmax", "aten::_softmax",
             {{"self", T(s)}, {"dim", Arg::integer(-1)}, {"half_to_float", Arg::boolean(false)}},
             meta({3, 100, C}));
  const int y = h.node("add", "aten::add",
                       {{"self", T(p)}, {"other", Arg::number(1.0)}, {"alpha", Arg::integer(1)}},
                       meta({3, 100, C}));
  h.graph().add_output(y);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.partition.regions.size(), 1u);
  h.run(cg);
  double worst = 0;
  for (int64_t r = 0; r < R; ++r) {
    double m = -1e30, sum = 0;
    for (int64_t c = 0; c < C; ++c)
      m = std::max(m, 0.5 * h.at(x, static_cast<uint64_t>(r * C + c)));
    for (int64_t c = 0; c < C; ++c)
      sum += std::exp(0.5 * h.at(x, static_cast<uint64_t>(r * C + c)) - m);
    for (int64_t c = 0; c < C; ++c) {
      const double want = std::exp(0.5 * h.at(x, static_cast<uint64_t>(r * C + c)) - m) / sum + 1.0;
      worst = std::max(worst, std::abs(want - h.at(y, static_cast<uint64_t>(r * C + c))));
    }
  }
  EXPECT_LT(worst, 1e-5);
}

TEST(GraphCompiler, LayerNormStoresItsStatisticsAndWeightGradientSumsOverRows) {
  GraphHarness h;
  const int64_t R = 130, D = 64;
  const int x = h.input("x", {R, D});
  const int w = h.input("w", {D});
  const int b = h.input("b", {D});
  const int out = h.multi("ln", "aten::native_layer_norm",
                          {{"input", T(x)},
                           {"normalized_shape", Arg::integers({D})},
                           {"weight", T(w)},
                           {"bias", T(b)},
                           {"eps", Arg::number(1e-5)}},
                          {meta({R, D}), meta({R, 1}), meta({R, 1})});
  const int mean = out + 1, rstd = out + 2;
  // A bias-gradient-like column sum of the result, in the same region.
  const int cs = h.node(
      "sum", "aten::sum",
      {{"self", T(out)}, {"dim", Arg::integers({0})}, {"keepdim", Arg::boolean(false)}}, meta({D}));
  for (int v : {out, mean, rstd, cs}) h.graph().add_output(v);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.partition.regions.size(), 1u) << cg.region_name[0];
  h.run(cg);
  std::vector<double> colsum(D, 0.0);
  double worst = 0;
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mu += h.at(x, static_cast<uint64_t>(r * D + d));
    mu /= D;
    for (int64_t d = 0; d < D; ++d)
      var += std::pow(h.at(x, static_cast<uint64_t>(r * D + d)) - mu, 2);
    var /= D;
    const double rs = 1.0 / std::sqrt(var + 1e-5);
    worst = std::max(worst, std::abs(mu - h.at(mean, static_cast<uint64_t>(r))));
    worst = std::max(worst, std::abs(rs - h.at(rstd, static_cast<uint64_t>(r))));
    for (int64_t d = 0; d < D; ++d) {
      const double y = (h.at(x, static_cast<uint64_t>(r * D + d)) - mu) * rs *
                           h.at(w, static_cast<uint64_t>(d)) +
                       h.at(b, static_cast<uint64_t>(d));
      colsum[static_cast<size_t>(d)] += y;
      worst = std::max(worst, std::abs(y - h.at(out, static_cast<uint64_t>(r * D + d))));
    }
  }
  for (int64_t d = 0; d < D; ++d) {
    worst = std::max(
        worst, std::abs(colsum[static_cast<size_t>(d)] - h.at(cs, static_cast<uint64_t>(d))) / 10);
  }
  EXPECT_LT(worst, 1e-4);
}

// Linear(512, 2048) + GELU on 64 rows: the fused region transposes the weight on TensorE with
// one PSUM evacuation per transpose, the library's matmul batches them per bank on VectorE and
// ScalarE; the cost model bounds the library's matmul plus a GELU region below the fused region,
// and the simulated run agrees.
TEST(GraphCompiler, LinearGeluTakesTheLibraryMatmulWhenTheCostModelBoundsItFaster) {
  GraphHarness h;
  const int64_t M = 64, K = 512, N = 2048;
  const int x = h.input("x", {M, K});
  const int w = h.input("w", {N, K}, 0.05f);
  const int b = h.input("b", {N});
  const int wt = h.node("t", "aten::t", {{"self", T(w)}}, meta({K, N}, {1, K}), w);
  const int mm = h.node("addmm", "aten::addmm",
                        {{"self", T(b)},
                         {"mat1", T(x)},
                         {"mat2", T(wt)},
                         {"beta", Arg::integer(1)},
                         {"alpha", Arg::integer(1)}},
                        meta({M, N}));
  // Through a reshape, as a 3-d Linear's output is: the GELU region reads the view of what the
  // library's matmul stored.
  const int v =
      h.node("view", "aten::view", {{"self", T(mm)}, {"size", Arg::integers({4, M / 4, N})}},
             meta({4, M / 4, N}), mm);
  const int y = h.node("gelu", "aten::gelu", {{"self", T(v)}, {"approximate", Arg::string("none")}},
                       meta({4, M / 4, N}));
  h.graph().add_output(y);
  CompiledGraph fused = h.compile(false);
  EXPECT_EQ(fused.node_class[1], NodeClass::kFused);
  const double fused_ns = h.run(fused).duration().ns();
  CompiledGraph cg = h.compile();
  EXPECT_EQ(cg.node_class[1], NodeClass::kKernel);
  EXPECT_NE(cg.node_reason[1].find("library's matmul"), std::string::npos) << cg.node_reason[1];
  EXPECT_EQ(cg.node_class[3], NodeClass::kFused);
  EXPECT_EQ(cg.segments.size(), 1u);
  const double chosen_ns = h.run(cg).duration().ns();
  EXPECT_LT(chosen_ns, fused_ns);
  double worst = 0;
  for (int64_t m = 0; m < M; m += 7) {
    for (int64_t n = 0; n < N; n += 3) {
      double acc = h.at(b, static_cast<uint64_t>(n));
      for (int64_t k = 0; k < K; ++k) {
        acc += double(h.at(x, static_cast<uint64_t>(m * K + k))) *
               h.at(w, static_cast<uint64_t>(n * K + k));
      }
      worst = std::max(worst, std::abs(gelu(acc) - h.at(y, static_cast<uint64_t>(m * N + n))));
    }
  }
  EXPECT_LT(worst, 1e-4);
  // The pre-activation goes through HBM now: the library's matmul stores it.
  EXPECT_GE(cg.partition.stored_by[static_cast<size_t>(mm)], 0);
}

// Two sums over the rows of 3072-wide products need 6 PSUM banks each (one per 512 columns);
// one region holding both would need 12 of the core's 8 and fail to compile, sending every
// node to its eager kernel. The second sum starts a region of its own: everything fuses.
TEST(GraphCompiler, ReductionsOverRowsSplitWhereTheirPsumBanksRunOut) {
  GraphHarness h;
  const int64_t R = 8, D = 3072;
  const int x = h.input("x", {R, D});
  const int y = h.input("y", {R, D});
  const int p = h.node("mul", "aten::mul", {{"self", T(x)}, {"other", T(y)}}, meta({R, D}));
  auto colsum = [&](const std::string& name, int v) {
    return h.node(name, "aten::sum",
                  {{"self", T(v)}, {"dim", Arg::integers({0})}, {"keepdim", Arg::boolean(false)}},
                  meta({D}));
  };
  const int q = h.node("mul2", "aten::mul", {{"self", T(p)}, {"other", T(x)}}, meta({R, D}));
  const int s1 = colsum("sum1", p);
  const int s2 = colsum("sum2", q);
  h.graph().add_output(s1);
  h.graph().add_output(s2);
  CompiledGraph cg = h.compile();
  for (size_t n = 0; n < cg.node_class.size(); ++n) {
    EXPECT_EQ(cg.node_class[n], NodeClass::kFused) << n << ": " << cg.node_reason[n];
  }
  EXPECT_EQ(cg.partition.regions.size(), 2u);
  h.run(cg);
  double worst = 0;
  for (int64_t d = 0; d < D; d += 5) {
    double a = 0, b = 0;
    for (int64_t r = 0; r < R; ++r) {
      const uint64_t i = static_cast<uint64_t>(r * D + d);
      a += double(h.at(x, i)) * h.at(y, i);
      b += double(h.at(x, i)) * h.at(y, i) * h.at(x, i);
    }
    worst = std::max(worst, std::abs(a - h.at(s1, static_cast<uint64_t>(d))));
    worst = std::max(worst, std::abs(b - h.at(s2, static_cast<uint64_t>(d))));
  }
  EXPECT_LT(worst, 1e-4);
}

// A sum over the rows of an 8192-wide product (a layer norm's weight gradient at width 8192)
// needs 16 PSUM banks when every column chunk keeps its own; the core has 8. The tiles go chunk
// by chunk and the chunks share one chunk's banks, so the region compiles.
TEST(GraphCompiler, WideReductionOverRowsGoesChunkByChunk) {
  GraphHarness h;
  const int64_t R = 3, D = 8192;
  const int x = h.input("x", {R, D});
  const int y = h.input("y", {R, D});
  const int p = h.node("mul", "aten::mul", {{"self", T(x)}, {"other", T(y)}}, meta({R, D}));
  const int s = h.node(
      "sum", "aten::sum",
      {{"self", T(p)}, {"dim", Arg::integers({0})}, {"keepdim", Arg::boolean(false)}}, meta({D}));
  h.graph().add_output(s);
  CompiledGraph cg = h.compile();
  for (size_t n = 0; n < cg.node_class.size(); ++n) {
    EXPECT_EQ(cg.node_class[n], NodeClass::kFused) << n << ": " << cg.node_reason[n];
  }
  h.run(cg);
  double worst = 0;
  for (int64_t d = 0; d < D; ++d) {
    double a = 0;
    for (int64_t r = 0; r < R; ++r) {
      const uint64_t i = static_cast<uint64_t>(r * D + d);
      a += double(h.at(x, i)) * h.at(y, i);
    }
    worst = std::max(worst, std::abs(a - h.at(s, static_cast<uint64_t>(d))));
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(GraphCompiler, RegionsChainInOneLaunchWithSections) {
  GraphHarness h;
  const int64_t M = 128, K = 64, N = 64;
  const int x = h.input("x", {M, K});
  const int w1 = h.input("w1", {K, N}, 0.2f);
  const int w2 = h.input("w2", {N, N}, 0.2f);
  const int a = h.node("mm1", "aten::mm", {{"self", T(x)}, {"mat2", T(w1)}}, meta({M, N}));
  const int r = h.node("relu", "aten::relu", {{"self", T(a)}}, meta({M, N}));
  const int c = h.node("mm2", "aten::mm", {{"self", T(r)}, {"mat2", T(w2)}}, meta({M, N}));
  h.graph().add_output(c);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.segments.size(), 1u);
  ASSERT_EQ(cg.partition.regions.size(), 2u);
  EXPECT_EQ(cg.segments[0].linked.program.sections.size(), 2u);
  h.run(cg);
  double worst = 0;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> hid(N);
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(h.at(x, static_cast<uint64_t>(m * K + k))) *
             h.at(w1, static_cast<uint64_t>(k * N + n));
      hid[static_cast<size_t>(n)] = std::max(s, 0.0);
    }
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < N; ++k)
        s += hid[static_cast<size_t>(k)] * h.at(w2, static_cast<uint64_t>(k * N + n));
      worst = std::max(worst, std::abs(s - h.at(c, static_cast<uint64_t>(m * N + n))));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

// Three parts, each one DMA load of its own value on its own queue (nothing to wait for by
// data): the second part's load waits for the first part's loads (at a launch's start they
// would share the DMA engines with the first part's critical loads); the third part's does not.
TEST(GraphCompiler, SecondPartPrefetchesAfterTheFirstPartsLoads) {
  auto core = testing::make_device()->params().core;
  std::vector<kernels::compiler::Part> parts(3);
  for (int i = 0; i < 3; ++i) {
    device_model::Program& p = parts[static_cast<size_t>(i)].program;
    p.stream(kernels::dma_queue(static_cast<uint8_t>(4 * i)))
        .instructions.push_back(device_model::isa::dma_copy(
            device_model::isa::sbuf_tile(device_model::DType::kFp32, 128, 4096 * i, 256),
            device_model::isa::hbm_rows(device_model::DType::kFp32,
                                        kernels::compiler::virtual_address(i), 128, 256, 256)));
    parts[static_cast<size_t>(i)].name = "part" + std::to_string(i);
  }
  const auto linked = kernels::compiler::link("g", parts, {0, 1, 2}, core);
  auto waits_of = [&](uint8_t q) {
    int n = 0;
    for (const auto& s : linked.program.streams) {
      if (s.id.name() != kernels::dma_queue(q).name()) continue;
      for (const auto& in : s.instructions) n += in.op == device_model::Opcode::kSemWait;
    }
    return n;
  };
  EXPECT_EQ(waits_of(0), 0);
  EXPECT_EQ(waits_of(4), 1);  // after part 0's load queue
  EXPECT_EQ(waits_of(8), 0);  // the third part is not held back
}

TEST(GraphCompiler, OpaqueNodesAreEagerOrHostAndSplitSegments) {
  GraphHarness h;
  const int x = h.input("x", {16, 8});
  const int a = h.node("exp", "aten::exp", {{"self", T(x)}}, meta({16, 8}));
  const int s = h.node("cumsum", "aten::cumsum", {{"self", T(a)}, {"dim", Arg::integer(0)}},
                       meta({16, 8}), -1, /*device_kernel=*/false);
  const int e = h.node("emb", "aten::embedding_dense_backward", {{"grad_output", T(s)}},
                       meta({16, 8}), -1, /*device_kernel=*/true);
  const int u = h.node("msort", "aten::msort", {{"self", T(e)}}, meta({16, 8}), -1,
                       /*device_kernel=*/true);
  const int y = h.node("neg", "aten::neg", {{"self", T(u)}}, meta({16, 8}));
  h.graph().add_output(y);
  CompiledGraph cg = h.compile();
  EXPECT_EQ(cg.node_class[0], NodeClass::kFused);
  EXPECT_EQ(cg.node_class[1], NodeClass::kHost);
  // Index-driven data movement: the device kernel, built from the indices when the graph runs.
  EXPECT_EQ(cg.node_class[2], NodeClass::kNative);
  EXPECT_EQ(cg.node_class[3], NodeClass::kEager);
  EXPECT_EQ(cg.node_class[4], NodeClass::kFused);
  ASSERT_EQ(cg.segments.size(), 2u);
  EXPECT_EQ(cg.segments[0].host_node, 1);
  EXPECT_FALSE(cg.segments[1].prelinked);  // the eager node's programs are spliced in at run time
  EXPECT_NE(cg.node_reason[1].find("no lowering"), std::string::npos) << cg.node_reason[1];
  EXPECT_NE(cg.node_reason[2].find("data-dependent"), std::string::npos) << cg.node_reason[2];
  EXPECT_NE(cg.node_reason[3].find("no lowering"), std::string::npos) << cg.node_reason[3];
}

TEST(GraphCompiler, ViewsBetweenRegionsReadStridedMemory) {
  GraphHarness h;
  // y = (x^T + 1) where x^T is a transposing view of a region's result: two regions.
  const int x = h.input("x", {48, 40});
  const int a =
      h.node("mul", "aten::mul", {{"self", T(x)}, {"other", Arg::number(2.0)}}, meta({48, 40}));
  const int t = h.node("t", "aten::t", {{"self", T(a)}}, meta({40, 48}, {1, 40}), a);
  const int y = h.node("add", "aten::add",
                       {{"self", T(t)}, {"other", Arg::number(1.0)}, {"alpha", Arg::integer(1)}},
                       meta({40, 48}));
  h.graph().add_output(y);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.partition.regions.size(), 2u);
  h.run(cg);
  double worst = 0;
  for (int64_t i = 0; i < 40; ++i) {
    for (int64_t j = 0; j < 48; ++j) {
      const double want = 2.0 * h.at(x, static_cast<uint64_t>(j * 40 + i)) + 1.0;
      worst = std::max(worst, std::abs(want - h.at(y, static_cast<uint64_t>(i * 48 + j))));
    }
  }
  EXPECT_LT(worst, 1e-6);
}

// An optimizer's per-parameter updates (alike flat regions) share one program whose tiles are
// sized for the widest parameter: a small first member must not cut the large ones into tiles
// of its own width (a 256-element first member once made a [1024, 512] one 1024 tiles).
TEST(GraphCompiler, GroupedUpdatesTileForTheWidestMember) {
  GraphHarness h;
  const std::vector<std::vector<int64_t>> shapes = {{256}, {1024, 512}, {512}};
  std::vector<int> ins, outs;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::string s = std::to_string(k);
    const int x = h.input("x" + s, shapes[k]);
    const int g = h.input("g" + s, shapes[k]);
    const int m = h.node("mul" + s, "aten::mul", {{"self", T(g)}, {"other", Arg::number(0.5)}},
                         meta(shapes[k]));
    const int y =
        h.node("sub" + s, "aten::sub", {{"self", T(x)}, {"other", T(m)}}, meta(shapes[k]));
    h.graph().add_output(y);
    ins.push_back(x);
    ins.push_back(g);
    outs.push_back(y);
  }
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.segments.size(), 1u);
  ASSERT_EQ(cg.segments[0].parts.size(), 1u) << "the three updates are one grouped program";
  EXPECT_LT(cg.instructions, 200u);
  h.run(cg);
  double worst = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const uint64_t n =
        static_cast<uint64_t>(shapes[k][0] * (shapes[k].size() > 1 ? shapes[k][1] : 1));
    for (uint64_t i = 0; i < n; ++i) {
      const double want = double(h.at(ins[2 * k], i)) - 0.5 * h.at(ins[2 * k + 1], i);
      worst = std::max(worst, std::abs(want - h.at(outs[k], i)));
    }
  }
  EXPECT_LT(worst, 1e-5);
}

// A kept input mutation (an in-place update's copy_ into its parameter) has no consumer and is no
// graph output, but its region must still write it: the parameter is the result.
TEST(GraphCompiler, CopyIntoAnInputIsStored) {
  GraphHarness h;
  const int x = h.input("x", {256, 64});
  const int g = h.input("g", {256, 64});
  std::vector<float> x0(256 * 64), g0(256 * 64);
  for (uint64_t i = 0; i < x0.size(); ++i) {
    x0[i] = h.at(x, i);
    g0[i] = h.at(g, i);
  }
  const int m =
      h.node("mul", "aten::mul", {{"self", T(g)}, {"other", Arg::number(0.5)}}, meta({256, 64}));
  const int y = h.node("sub", "aten::sub", {{"self", T(x)}, {"other", T(m)}}, meta({256, 64}));
  h.node("copy_", "aten::copy_", {{"self", T(x)}, {"src", T(y)}}, meta({256, 64}), x);
  CompiledGraph cg = h.compile();
  h.run(cg);
  double worst = 0;
  for (uint64_t i = 0; i < x0.size(); ++i) {
    worst = std::max(worst, std::abs(double(x0[i]) - 0.5 * g0[i] - h.at(x, i)));
  }
  EXPECT_LT(worst, 1e-5);
}

// neuronsim::sdpa (what torch.compile's attention rewrites produce) is one attention region: the
// flash attention program between a producer and a consumer region, its output in HBM, its
// scores and probabilities nowhere.
TEST(GraphCompiler, SdpaIsOneAttentionRegionBetweenItsNeighbours) {
  GraphHarness h;
  const int64_t G = 2, S = 200, D = 32;
  const int q = h.input("q", {G, S, D});
  const int k = h.input("k", {G, S, D});
  const int v = h.input("v", {G, S, D});
  const int q2 =
      h.node("mul", "aten::mul", {{"self", T(q)}, {"other", Arg::number(0.5)}}, meta({G, S, D}));
  const int o = h.node("sdpa", "neuronsim::sdpa",
                       {{"q", T(q2)},
                        {"k", T(k)},
                        {"v", T(v)},
                        {"attn_mask", Arg::none()},
                        {"is_causal", Arg::boolean(true)},
                        {"scale", Arg::none()}},
                       meta({G, S, D}));
  const int y = h.node("relu", "aten::relu", {{"self", T(o)}}, meta({G, S, D}));
  h.graph().add_output(y);
  CompiledGraph cg = h.compile();
  ASSERT_EQ(cg.segments.size(), 1u);
  ASSERT_EQ(cg.partition.regions.size(), 3u);
  EXPECT_EQ(cg.partition.regions[1].kind, kernels::compiler::Region::Kind::kAttention);
  EXPECT_NE(cg.region_name[1].find("flash_attention"), std::string::npos) << cg.region_name[1];
  EXPECT_EQ(cg.node_class[1], NodeClass::kFused);
  EXPECT_EQ(cg.partition.stored_by[static_cast<size_t>(o)], 1);
  h.run(cg);
  const double scale = 1.0 / std::sqrt(double(D));
  double worst = 0;
  for (int64_t b = 0; b < G; ++b) {
    for (int64_t i = 0; i < S; ++i) {
      std::vector<double> p(static_cast<size_t>(i + 1));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) {
          s += 0.5 * h.at(q, static_cast<uint64_t>((b * S + i) * D + d)) *
               h.at(k, static_cast<uint64_t>((b * S + j) * D + d));
        }
        p[static_cast<size_t>(j)] = s * scale;
        mx = std::max(mx, s * scale);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < D; ++e) {
        double r = 0;
        for (int64_t j = 0; j <= i; ++j) {
          r += p[static_cast<size_t>(j)] * h.at(v, static_cast<uint64_t>((b * S + j) * D + e));
        }
        r = std::max(r / sum, 0.0);
        worst = std::max(worst, std::abs(r - h.at(y, static_cast<uint64_t>((b * S + i) * D + e))));
      }
    }
  }
  EXPECT_LT(worst, 1e-4);
}

// Operands the kernel does not take (a head dim above 128) leave the node opaque: it runs with
// its eager kernel, the reason named.
TEST(GraphCompiler, SdpaWithAWideHeadStaysEager) {
  GraphHarness h;
  const int q = h.input("q", {1, 16, 160});
  const int o = h.node("sdpa", "neuronsim::sdpa",
                       {{"q", T(q)},
                        {"k", T(q)},
                        {"v", T(q)},
                        {"attn_mask", Arg::none()},
                        {"is_causal", Arg::boolean(false)},
                        {"scale", Arg::number(0.1)}},
                       meta({1, 16, 160}));
  h.graph().add_output(o);
  CompiledGraph cg = h.compile();
  EXPECT_EQ(cg.node_class[0], NodeClass::kEager);
  EXPECT_NE(cg.node_reason[0].find("head dims"), std::string::npos) << cg.node_reason[0];
}

}  // namespace
}  // namespace neuronsim
