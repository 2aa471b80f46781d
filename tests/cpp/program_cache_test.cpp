// The program cache's relocation: a program built for one set of tensors, moved to another,
// equals the program built for the other directly and runs the same (time and values).
#include <gtest/gtest.h>

#include <cstring>

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/runtime/program_cache.h"
#include "test_util.h"

namespace neuronsim {
namespace {

using device_model::AccessPattern;
using device_model::Program;
using kernels::TensorDesc;
using runtime::HbmSpan;

constexpr int64_t kRows = 96, kCols = 80;  // not a multiple of the 128 partitions
constexpr uint64_t kBytes = kRows * kCols * 4;

TensorDesc matrix(uint64_t address) {
  return TensorDesc{address, device_model::DType::kFp32, {kRows, kCols}, {kCols, 1}};
}

// y = x * 0.5 + z: two inputs, one output.
Program axpy(uint64_t x, uint64_t z, uint64_t y, const device_model::CoreParams& core) {
  kernels::Expr e;
  const auto h =
      e.alu(device_model::AluOp::kMultiply, kernels::Arg::input(0), kernels::Arg::constant(0.5f));
  e.alu(device_model::AluOp::kAdd, h, kernels::Arg::input(1));
  return kernels::build_elementwise("axpy", {matrix(x), matrix(z)}, matrix(y), e, core);
}

void expect_same_addresses(const Program& a, const Program& b) {
  ASSERT_EQ(a.streams.size(), b.streams.size());
  size_t hbm = 0;
  for (size_t s = 0; s < a.streams.size(); ++s) {
    ASSERT_EQ(a.streams[s].instructions.size(), b.streams[s].instructions.size());
    for (size_t i = 0; i < a.streams[s].instructions.size(); ++i) {
      const auto& x = a.streams[s].instructions[i];
      const auto& y = b.streams[s].instructions[i];
      EXPECT_EQ(x.dst, y.dst);
      EXPECT_EQ(x.src0, y.src0);
      EXPECT_EQ(x.src1, y.src1);
      EXPECT_EQ(x.operand0, y.operand0);
      for (const AccessPattern* ap : {&x.dst, &x.src0, &x.src1})
        hbm += ap->space == device_model::MemSpace::kHbm;
    }
  }
  EXPECT_GT(hbm, 0u);  // the program does address HBM
}

TEST(ProgramCache, RelocatedProgramEqualsOneBuiltForTheNewTensors) {
  auto dev = testing::make_device();
  const auto& core = dev->params().core;
  Program p = axpy(0, kBytes, 2 * kBytes, core);
  const std::vector<HbmSpan> from = {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}};
  // The new tensors in another order and elsewhere, with gaps between them.
  const uint64_t x = 10 * kBytes + 256, z = 4 * kBytes, y = 7 * kBytes + 512;
  const std::vector<HbmSpan> to = {{x, kBytes}, {z, kBytes}, {y, kBytes}};
  ASSERT_TRUE(runtime::relocate(p, from, to));
  expect_same_addresses(p, axpy(x, z, y, core));
}

TEST(ProgramCache, RelocatedProgramRunsLikeADirectBuild) {
  auto dev = testing::make_device();
  const auto& core = dev->params().core;
  const uint64_t x = 3 * kBytes, z = 5 * kBytes, y = 9 * kBytes;
  auto* xs = reinterpret_cast<float*>(dev->hbm_data() + x);
  auto* zs = reinterpret_cast<float*>(dev->hbm_data() + z);
  for (int64_t i = 0; i < kRows * kCols; ++i) xs[i] = static_cast<float>(i % 17), zs[i] = 1.0f;

  const device_model::RunResult direct = dev->run(0, axpy(x, z, y, core));
  std::vector<float> want(kRows * kCols);
  std::memcpy(want.data(), dev->hbm_data() + y, kBytes);
  std::memset(dev->hbm_data() + y, 0, kBytes);

  runtime::ProgramCache cache;
  cache.set_enabled(true);
  const std::vector<HbmSpan> built = {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}};
  ASSERT_TRUE(cache.insert("axpy", {axpy(0, kBytes, 2 * kBytes, core)}, built));
  const auto* hit = cache.find("axpy", {{x, kBytes}, {z, kBytes}, {y, kBytes}});
  ASSERT_NE(hit, nullptr);
  const device_model::RunResult cached = dev->run(0, hit->front(), /*validated=*/true);
  EXPECT_EQ(cached.duration(), direct.duration());
  EXPECT_EQ(std::memcmp(want.data(), dev->hbm_data() + y, kBytes), 0);
  EXPECT_EQ(want[5], 5.0f * 0.5f + 1.0f);
  EXPECT_EQ(cache.hits(), 1u);
}

TEST(ProgramCache, MissesOnOtherSizesAndRefusesProgramsAddressingOtherMemory) {
  auto dev = testing::make_device();
  const auto& core = dev->params().core;
  runtime::ProgramCache cache;
  cache.set_enabled(true);
  // The output lies outside the declared regions: not cacheable.
  EXPECT_FALSE(
      cache.insert("k", {axpy(0, kBytes, 2 * kBytes, core)}, {{0, kBytes}, {kBytes, kBytes}}));
  EXPECT_EQ(cache.size(), 0u);
  ASSERT_TRUE(cache.insert("k", {axpy(0, kBytes, 2 * kBytes, core)},
                           {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}}));
  EXPECT_EQ(cache.find("k", {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes + 4}}), nullptr);
  EXPECT_EQ(cache.find("other", {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}}), nullptr);
  EXPECT_NE(cache.find("k", {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}}), nullptr);
  cache.set_enabled(false);  // NEURONSIM_PROGRAM_CACHE=0's state: nothing kept or found
  EXPECT_EQ(cache.find("k", {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}}), nullptr);
  EXPECT_FALSE(cache.insert("k", {axpy(0, kBytes, 2 * kBytes, core)},
                            {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}}));
}

TEST(ProgramCache, CapacityBoundsTheEntries) {
  auto dev = testing::make_device();
  runtime::ProgramCache cache(2);
  cache.set_enabled(true);
  const std::vector<HbmSpan> r = {{0, kBytes}, {kBytes, kBytes}, {2 * kBytes, kBytes}};
  for (const char* k : {"a", "b", "c"})
    ASSERT_TRUE(cache.insert(k, {axpy(0, kBytes, 2 * kBytes, dev->params().core)}, r));
  EXPECT_LE(cache.size(), 2u);
  EXPECT_NE(cache.find("c", r), nullptr);
}

}  // namespace
}  // namespace neuronsim
