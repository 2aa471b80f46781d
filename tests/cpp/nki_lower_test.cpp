// kernels/nki: a traced kernel (loops, tile allocations, affine addresses) lowered to a device
// program and run: values, the allocator's multi-buffering, synchronisation, and the errors.
#include <gtest/gtest.h>

#include <cstring>

#include "neuronsim/kernels/nki/lower.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::MemSpace;
using kernels::nki::Affine;
using kernels::nki::Buffer;
using kernels::nki::Kernel;
using kernels::nki::KernelError;
using kernels::nki::Op;
using kernels::nki::Operand;
using kernels::nki::Stmt;
using kernels::nki::StmtKind;

// c[r, f] = a[r, f] + b[r, f] for `tiles` row tiles of [128, 64] fp32, one loop iteration each:
// loads into tiles declared in the loop body, a VectorE add, a store.
Kernel add_kernel(uint32_t tiles, uint64_t a, uint64_t b, uint64_t c) {
  Kernel k;
  k.name = "add";
  k.sources = {"k.py:1", "k.py:2", "k.py:3", "k.py:4"};
  const uint64_t bytes = uint64_t{tiles} * 128 * 64 * 4;
  k.buffers = {
      Buffer{"a", "[.., 64] fp32", MemSpace::kHbm, 1, bytes, a, false, 0},
      Buffer{"b", "[.., 64] fp32", MemSpace::kHbm, 1, bytes, b, false, 0},
      Buffer{"c", "[.., 64] fp32", MemSpace::kHbm, 1, bytes, c, false, 0},
      Buffer{"ta", "[128, 64] fp32", MemSpace::kSbuf, 128, 256, 0, false, 1},
      Buffer{"tb", "[128, 64] fp32", MemSpace::kSbuf, 128, 256, 0, false, 2},
      Buffer{"tc", "[128, 64] fp32", MemSpace::kSbuf, 128, 256, 0, false, 3},
  };
  k.variables = 1;
  auto hbm = [](int32_t buf) {
    Operand o;
    o.buffer = buf;
    o.partitions = 128;
    o.partition_stride = 64;
    o.offset = Affine{0, {{0, 128 * 64}}};  // row tile i
    o.dims = {{1, 64}};
    return o;
  };
  auto tile = [](int32_t buf) {
    Operand o;
    o.buffer = buf;
    o.partitions = 128;
    o.dims = {{1, 64}};
    return o;
  };
  auto dma = [&](Operand dst, Operand src, int32_t line) {
    Op op;
    op.inst.op = device_model::Opcode::kDmaCopy;
    op.dst = dst;
    op.src0 = src;
    op.source = line;
    return op;
  };
  Op add;
  add.inst.op = device_model::Opcode::kTensorTensor;
  add.inst.alu0 = device_model::AluOp::kAdd;
  add.dst = tile(5);
  add.src0 = tile(3);
  add.src1 = tile(4);
  add.source = 3;
  k.ops = {dma(tile(3), hbm(0), 1), dma(tile(4), hbm(1), 2), add, dma(hbm(2), tile(5), 3)};
  k.body = {
      {StmtKind::kLoop, 0, tiles, 0}, {StmtKind::kAlloc, 3, 0, 0}, {StmtKind::kAlloc, 4, 0, 0},
      {StmtKind::kOp, 0, 0, 0},       {StmtKind::kOp, 1, 0, 0},    {StmtKind::kAlloc, 5, 0, 0},
      {StmtKind::kOp, 2, 0, 0},       {StmtKind::kFree, 3, 0, 0},  {StmtKind::kFree, 4, 0, 0},
      {StmtKind::kOp, 3, 0, 0},       {StmtKind::kFree, 5, 0, 0},  {StmtKind::kEnd, 0, 0, 0},
  };
  k.finalize();
  return k;
}

TEST(NkiLower, LoopExpandsWithValuesAndSources) {
  auto dev = testing::make_device();
  const uint32_t tiles = 4;
  const uint64_t n = uint64_t{tiles} * 128 * 64;
  float* hbm = reinterpret_cast<float*>(dev->hbm_data());
  for (uint64_t i = 0; i < n; ++i) {
    hbm[i] = static_cast<float>(i);
    hbm[n + i] = 0.5f;
  }
  kernels::nki::LowerStats stats;
  const Kernel k = add_kernel(tiles, 0, n * 4, 2 * n * 4);
  const device_model::Program p = kernels::nki::lower(k, dev->params().core, &stats);
  EXPECT_EQ(stats.instructions, 4u * tiles);
  // Next fit: each iteration's three tiles land in fresh SBUF while it lasts.
  EXPECT_EQ(stats.sbuf_peak_bytes, 3u * 256);
  ASSERT_EQ(p.sources.size(), 4u);
  for (const auto& s : p.streams) EXPECT_EQ(s.sources.size(), s.instructions.size());
  const auto r = dev->run(0, p);
  EXPECT_GT(r.duration().ps, 0);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(hbm[2 * n + i], static_cast<float>(i) + 0.5f) << i;
}

TEST(NkiLower, AccessOutsideATensorNamesLineAndLoopIndex) {
  auto dev = testing::make_device();
  Kernel k = add_kernel(4, 0, 4 * 128 * 64 * 4, 8 * 128 * 64 * 4);
  k.buffers[0].bytes = 3 * 128 * 64 * 4;  // `a` holds three tiles: the fourth read overruns
  try {
    kernels::nki::lower(k, dev->params().core);
    FAIL() << "expected an error";
  } catch (const KernelError& e) {
    EXPECT_EQ(e.rule(), "out-of-bounds");
    EXPECT_EQ(std::string(e.what()).rfind("k.py:2: out-of-bounds: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("(loop indices 3)"), std::string::npos) << e.what();
  }
}

TEST(NkiLower, SbufCapacityNamesTheTile) {
  auto dev = testing::make_device();
  Kernel k = add_kernel(1, 0, 128 * 64 * 4, 2 * 128 * 64 * 4);
  k.buffers[5].bytes = dev->params().core.sbuf.partition_bytes;  // tc cannot fit beside ta, tb
  try {
    kernels::nki::lower(k, dev->params().core);
    FAIL() << "expected an error";
  } catch (const KernelError& e) {
    EXPECT_EQ(e.rule(), "sbuf-capacity");
    EXPECT_NE(std::string(e.what()).find("k.py:4: sbuf-capacity: tc"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace neuronsim
