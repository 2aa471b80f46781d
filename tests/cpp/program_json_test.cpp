// Programs as JSON: every opcode and field survives program_to_json -> text -> parse_program,
// and every malformed program is a ProgramFormatError naming the JSON path of the problem.
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <ostream>
#include <set>

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/instructions.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program_json.h"
#include "neuronsim/device_model/validator.h"

namespace neuronsim::device_model {

// Readable AP values in assertion messages.
void PrintTo(const AccessPattern& ap, std::ostream* os) {
  *os << ap.to_string();
}

namespace {

using namespace isa;
using nlohmann::json;

constexpr DType F32 = DType::kFp32, BF16 = DType::kBf16, I32 = DType::kInt32;
constexpr int64_t k2p32 = int64_t{1} << 32, k2p40 = int64_t{1} << 40;
constexpr uint64_t k2p50 = uint64_t{1} << 50;
constexpr uint32_t k2p20 = 1u << 20, k2p30 = 1u << 30;

// Values at the edges of what the format accepts, in every AP field.
AccessPattern extreme_sbuf() {
  AccessPattern ap =
      sbuf(DType::kFp8E5M2, k2p20, k2p30, k2p50, {{-k2p32, k2p30}, {k2p32, 1}, {0, 7}, {-1, 2}});
  return ap;
}
AccessPattern extreme_hbm() {
  AccessPattern ap = hbm_rows(DType::kUint8, k2p50, k2p30, 3, -k2p40);
  return ap;
}

Program every_opcode() {
  Program p;
  p.name = "every \"opcode\"";
  p.hbm_regions = {{"weights", 0, 4096}, {"out", 1 << 20, k2p50}};
  const auto t = sbuf_tile(F32, 128, 64, 32);
  const auto ti = sbuf(I32, 32, 32, 4, {{8, 4}, {1, 8}});
  const auto col = sbuf_tile(F32, 128, 1024, 1);
  p.stream({EngineKind::kTensor, 0}).instructions = {
      matmul(psum_tile(F32, 64, 2048, 32, 64), sbuf(BF16, 0, 128, 2, {{2, 64}}),
             sbuf_tile(DType::kFp8E4M3, 128, 512, 32), true),
      transpose(psum_tile(BF16, 16, 0, 128), sbuf_tile(BF16, 128, 0, 16)),
      sem_wait(7, 3),
  };
  {
    Instruction ts =
        tensor_scalar(ti, ti, AluOp::kMultiply, per_partition(col), AluOp::kBitwiseXor, imm(-2.5f));
    ts.reverse0 = true;
    ts.reverse1 = true;
    p.stream({EngineKind::kVector, 0}).instructions = {
        tensor_tensor(t, psum_tile(F32, 128, 0, 32), t, AluOp::kAbsMax),
        ts,
        tensor_reduce(sbuf_tile(F32, 32, 0, 4, 32), ti, ReduceOp::kMin, 2),
        tensor_copy(sbuf_tile(F32, 64, 0, 32, 64), sbuf_tile(DType::kFp16, 64, 128, 32, 64)),
        memset(extreme_sbuf(), -0.0f),
        memset(t, 1.5e-3f),
        select(t, sbuf_tile(DType::kUint8, 128, 0, 32), t, sbuf(F32, 0, 128, 0, {{-1, 32}})),
        select(t, t, t, -7.25f),
        rng(ti, RngDist::kNormal, -0.5f, 3.0f, UINT64_MAX, UINT64_MAX - 1, uint64_t{1} << 63),
        rng(t, RngDist::kInteger, -8, 8, 0, 0, 0),
        sem_signal(1, 2),
    };
  }
  {
    Instruction act = activation(t, psum_tile(F32, 128, 4096, 32), ActFunc::kGeluTanh, imm(0.5f),
                                 per_partition(col));
    act.has_acc_dst = true;
    act.acc_dst = sbuf_tile(F32, 128, 2048, 1);
    p.stream({EngineKind::kScalar, 0}).instructions = {
        act,
        activation(t, t, ActFunc::kSiluDx, per_partition(col), imm(-1e30f)),
        activation(t, t, ActFunc::kCopy),
        tensor_scalar(t, t, AluOp::kBypass, imm(0)),
    };
  }
  p.stream({EngineKind::kGpSimd, 0}).instructions = {
      iota(sbuf(I32, 96, 32, 0, {{64, 2}, {16, 4}, {4, 4}, {1, 4}}),
           std::numeric_limits<int32_t>::min(), -3,
           {1, -2, 3, std::numeric_limits<int32_t>::max()}),
      tensor_tensor(ti, ti, ti, AluOp::kShiftRight),
  };
  p.stream({EngineKind::kDma, 15}).instructions = {
      dma_copy(extreme_hbm(), extreme_sbuf()),
      sem_signal(65535, std::numeric_limits<int32_t>::min()),
  };
  p.stream({EngineKind::kDma, 0}).instructions = {
      dma_copy(sbuf_tile(F32, 128, 0, 32), hbm_rows(BF16, 4096, 128, 32, 0)),
      sem_wait(0, std::numeric_limits<int32_t>::max()),
  };
  return p;
}

void expect_same(const Instruction& a, const Instruction& b, const std::string& where) {
#define NEURONSIM_SAME(f) EXPECT_EQ(a.f, b.f) << where << ": field " #f
#define NEURONSIM_SAME_ENUM(f) \
  EXPECT_EQ(static_cast<int>(a.f), static_cast<int>(b.f)) << where << ": field " #f
  NEURONSIM_SAME_ENUM(op);
  NEURONSIM_SAME(dst);
  NEURONSIM_SAME(src0);
  NEURONSIM_SAME(src1);
  NEURONSIM_SAME(src2);
  NEURONSIM_SAME(has_src2);
  NEURONSIM_SAME(acc_dst);
  NEURONSIM_SAME(has_acc_dst);
  NEURONSIM_SAME_ENUM(alu0);
  NEURONSIM_SAME_ENUM(alu1);
  NEURONSIM_SAME(operand0.from_ap);
  NEURONSIM_SAME(operand0.ap);
  NEURONSIM_SAME(operand1.from_ap);
  NEURONSIM_SAME(operand1.ap);
  NEURONSIM_SAME(reverse0);
  NEURONSIM_SAME(reverse1);
  NEURONSIM_SAME_ENUM(func);
  NEURONSIM_SAME_ENUM(reduce);
  NEURONSIM_SAME(reduce_axes);
  NEURONSIM_SAME(accumulate);
  NEURONSIM_SAME(iota_base);
  NEURONSIM_SAME(iota_channel_multiplier);
  NEURONSIM_SAME(iota_steps);
  NEURONSIM_SAME(sem);
  NEURONSIM_SAME(sem_value);
  NEURONSIM_SAME_ENUM(rng_dist);
  NEURONSIM_SAME(rng_seed);
  NEURONSIM_SAME(rng_offset);
  NEURONSIM_SAME(rng_base);
#undef NEURONSIM_SAME
#undef NEURONSIM_SAME_ENUM
  // Bit patterns: -0.0 must stay -0.0.
  EXPECT_EQ(std::bit_cast<uint32_t>(a.imm), std::bit_cast<uint32_t>(b.imm)) << where << ": imm";
  EXPECT_EQ(std::bit_cast<uint32_t>(a.imm2), std::bit_cast<uint32_t>(b.imm2)) << where << ": imm2";
  EXPECT_EQ(std::bit_cast<uint32_t>(a.operand0.imm), std::bit_cast<uint32_t>(b.operand0.imm))
      << where << ": operand0.imm";
  EXPECT_EQ(std::bit_cast<uint32_t>(a.operand1.imm), std::bit_cast<uint32_t>(b.operand1.imm))
      << where << ": operand1.imm";
}

void expect_same(const Program& a, const Program& b) {
  EXPECT_EQ(a.name, b.name);
  ASSERT_EQ(a.hbm_regions.size(), b.hbm_regions.size());
  for (size_t i = 0; i < a.hbm_regions.size(); ++i) {
    EXPECT_EQ(a.hbm_regions[i].name, b.hbm_regions[i].name);
    EXPECT_EQ(a.hbm_regions[i].offset, b.hbm_regions[i].offset);
    EXPECT_EQ(a.hbm_regions[i].bytes, b.hbm_regions[i].bytes);
  }
  ASSERT_EQ(a.streams.size(), b.streams.size());
  for (const Stream& s : a.streams) {
    // JSON objects do not keep the stream order; streams are matched by id.
    const Stream* t = nullptr;
    for (const Stream& x : b.streams) {
      if (x.id == s.id) t = &x;
    }
    ASSERT_NE(t, nullptr) << s.id.name();
    ASSERT_EQ(s.instructions.size(), t->instructions.size()) << s.id.name();
    for (size_t i = 0; i < s.instructions.size(); ++i) {
      expect_same(s.instructions[i], t->instructions[i],
                  s.id.name() + "[" + std::to_string(i) + "] " +
                      std::string(opcode_name(s.instructions[i].op)));
    }
  }
}

TEST(ProgramJson, RoundTripsEveryOpcodeAndField) {
  const Program p = every_opcode();
  // The program must exercise every opcode and every optional field, or the round trip proves
  // less than it claims.
  std::set<int> ops;
  bool src2 = false, acc = false, alu1 = false, ap_operand = false, imm_operand = false,
       rev = false, accumulate = false, steps = false, seeds = false;
  for (const auto& s : p.streams) {
    for (const auto& in : s.instructions) {
      ops.insert(static_cast<int>(in.op));
      src2 |= in.has_src2;
      acc |= in.has_acc_dst;
      alu1 |= in.alu1 != AluOp::kBypass;
      ap_operand |= in.operand0.from_ap || in.operand1.from_ap;
      imm_operand |= (!in.operand0.from_ap && in.operand0.imm != 0) ||
                     (!in.operand1.from_ap && in.operand1.imm != 0);
      rev |= in.reverse0 && in.reverse1;
      accumulate |= in.accumulate;
      steps |= in.iota_steps[3] != 0;
      seeds |= in.rng_seed != 0 && in.rng_offset != 0 && in.rng_base != 0;
    }
  }
  EXPECT_EQ(ops.size(), static_cast<size_t>(kOpcodeCount));
  EXPECT_TRUE(src2 && acc && alu1 && ap_operand && imm_operand && rev && accumulate && steps &&
              seeds);

  const json j = program_to_json(p);
  expect_same(p, program_from_json(j));
  const std::string text = j.dump(2);
  const Program back = parse_program(text);
  expect_same(p, back);
  // Serialising the parsed program gives the same document.
  EXPECT_EQ(program_to_json(back), j);
}

TEST(ProgramJson, AccessPatternRoundTrip) {
  for (const AccessPattern& ap :
       {extreme_sbuf(), extreme_hbm(), psum_tile(F32, 1, 0, 1), sbuf(I32, 0, 1, 0, {})}) {
    const json j = access_pattern_to_json(ap);
    EXPECT_EQ(access_pattern_from_json(json::parse(j.dump()), "ap"), ap) << j.dump();
  }
}

// ---- errors ----

// A small valid program as JSON, to break one piece at a time.
json base() {
  Program p;
  p.name = "base";
  p.hbm_regions = {{"in", 0, 4096}};
  const auto t = sbuf_tile(F32, 128, 0, 4);
  p.stream({EngineKind::kVector, 0}).instructions = {
      sem_wait(0, 1), tensor_scalar(t, t, AluOp::kAdd, per_partition(sbuf_tile(F32, 128, 64, 1)))};
  p.stream({EngineKind::kScalar, 0}).instructions = {activation(t, t, ActFunc::kExp)};
  p.stream({EngineKind::kGpSimd, 0}).instructions = {iota(sbuf_tile(I32, 128, 0, 4), 0, 1, {1})};
  p.stream({EngineKind::kDma, 0}).instructions = {dma_copy(t, hbm_rows(F32, 0, 128, 4, 4)),
                                                  sem_signal(0)};
  return program_to_json(p);
}

// Parses `text` and expects a ProgramFormatError whose message contains each of `mentions`.
void expect_error(const std::string& text, const std::vector<std::string>& mentions) {
  try {
    parse_program(text);
    ADD_FAILURE() << "parsed: " << text;
  } catch (const ProgramFormatError& e) {
    const std::string what = e.what();
    for (const auto& m : mentions) {
      EXPECT_NE(what.find(m), std::string::npos) << "message: " << what << "\n  missing: " << m;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ProgramFormatError: " << e.what() << "\n  for: " << text;
  }
}
void expect_error(const json& j, const std::vector<std::string>& mentions) {
  expect_error(j.dump(), mentions);
}
// base() with one change.
template <typename Fn>
void expect_error_after(Fn&& change, const std::vector<std::string>& mentions) {
  json j = base();
  change(j);
  expect_error(j, mentions);
}

TEST(ProgramJson, BaseProgramParses) {
  EXPECT_NO_THROW(parse_program(base().dump()));
  // Tool-level descriptions are accepted and ignored.
  json j = base();
  j["inputs"] = json::array();
  j["outputs"] = {{"x", 1}};
  j["description"] = "text";
  j["hbm_regions"][0]["init"] = "random";
  j["hbm_regions"][0]["output"] = true;
  EXPECT_NO_THROW(parse_program(j.dump()));
}

TEST(ProgramJson, NotJson) {
  for (const char* text : {"", "{", "[1,", "{\"name\": }", "{'name': 'x'}", "nul"}) {
    expect_error(std::string(text), {"not valid JSON"});
  }
  // Numbers beyond double are a JSON error too (nlohmann reports them as out_of_range).
  expect_error(std::string("{\"name\": 1e400}"), {"not valid JSON", "1e400"});
  expect_error(std::string("[]"), {"$: a program must be a JSON object"});
  expect_error(std::string("\"program\""), {"$: a program must be a JSON object"});
}

TEST(ProgramJson, UnknownNames) {
  expect_error_after([](json& j) { j["streams"]["vector"][1]["op"] = "tensor_scalr"; },
                     {"streams.vector[1].op: unknown opcode 'tensor_scalr'"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["dst"]["dtype"] = "fp64"; },
                     {"streams.vector[1].dst.dtype: unknown dtype 'fp64'"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["operand0"]["dtype"] = "float"; },
                     {"streams.vector[1].operand0.dtype: unknown dtype 'float'"});
  expect_error_after([](json& j) { j["streams"]["dma0"][0]["src0"]["space"] = "dram"; },
                     {"streams.dma0[0].src0.space: unknown memory space 'dram'"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["alu0"] = "plus"; },
                     {"streams.vector[1].alu0: unknown ALU operator 'plus'"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["alu1"] = "ADD"; },
                     {"streams.vector[1].alu1: unknown ALU operator 'ADD'"});
  expect_error_after([](json& j) { j["streams"]["scalar"][0]["func"] = "swish"; },
                     {"streams.scalar[0].func: unknown activation function 'swish'"});
  expect_error_after([](json& j) { j["streams"]["scalar"][0]["reduce"] = "mean"; },
                     {"streams.scalar[0].reduce: unknown reduce operator 'mean'"});
}

TEST(ProgramJson, BadStreamNames) {
  for (const char* name :
       {"vec", "Vector", "dma", "dma256", "dma07", "dma-1", "DMA0", "dma1x", "tensor0", ""}) {
    expect_error_after(
        [&](json& j) { j["streams"][name] = json::array(); },
        {"streams." + std::string(name) + ": unknown stream name", "dma0 ... dma15"});
  }
  // dma16 and up parse (the format does not know the preset); the validator rejects them.
  json j = base();
  j["streams"]["dma20"] = j["streams"]["dma0"];
  const Program p = parse_program(j.dump());
  const ChipParams chip = parse_chip_params(Config::load("trn1"));
  try {
    validate(p, {&chip.core, chip.hbm.capacity_bytes, {}});
    ADD_FAILURE() << "dma20 validated";
  } catch (const ValidationError& e) {
    EXPECT_EQ(e.rule(), "dma-queue-range");
  }
}

TEST(ProgramJson, WrongTypes) {
  auto in = [](json& j) -> json& { return j["streams"]["vector"][1]; };
  expect_error_after([](json& j) { j["name"] = 5; }, {"name: expected a string"});
  expect_error_after([](json& j) { j["streams"] = json::array(); },
                     {"streams: expected an object of stream name -> instructions"});
  expect_error_after([](json& j) { j["streams"]["vector"] = json::object(); },
                     {"streams.vector: expected an array of instructions"});
  expect_error_after([](json& j) { j["streams"]["vector"][0] = "sem_wait"; },
                     {"streams.vector[0]: expected an instruction object"});
  expect_error_after([&](json& j) { in(j)["op"] = 3; },
                     {"streams.vector[1].op: expected a string"});
  expect_error_after([&](json& j) { in(j)["dst"] = 5; },
                     {"streams.vector[1].dst: expected an access pattern object"});
  expect_error_after([&](json& j) { in(j)["dst"]["partitions"] = "128"; },
                     {"streams.vector[1].dst.partitions: expected a number"});
  expect_error_after([&](json& j) { in(j)["dst"]["partitions"] = 1.5; },
                     {"streams.vector[1].dst.partitions: expected an integer"});
  expect_error_after([&](json& j) { in(j)["dst"]["offset"] = true; },
                     {"streams.vector[1].dst.offset: expected a number"});
  expect_error_after([&](json& j) { in(j)["dst"]["dims"] = 4; },
                     {"streams.vector[1].dst.dims: expected an array of [stride, size] pairs"});
  expect_error_after([&](json& j) { in(j)["dst"]["dims"] = json::array({json::array({1})}); },
                     {"streams.vector[1].dst.dims[0]: expected [stride, size]"});
  expect_error_after(
      [&](json& j) {
        in(j)["dst"]["dims"] = {{1, 2}, {"a", 2}};
      },
      {"streams.vector[1].dst.dims[1][0]: expected a number"});
  expect_error_after(
      [&](json& j) {
        in(j)["dst"]["dims"] = {{1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}};
      },
      {"streams.vector[1].dst.dims: at most 4 free dims"});
  expect_error_after([&](json& j) { in(j)["dst"]["dtype"] = 4; },
                     {"streams.vector[1].dst.dtype: expected a string"});
  expect_error_after([&](json& j) { in(j)["reverse0"] = 1; },
                     {"streams.vector[1].reverse0: expected a boolean"});
  expect_error_after([&](json& j) { in(j)["reverse1"] = "true"; },
                     {"streams.vector[1].reverse1: expected a boolean"});
  expect_error_after([&](json& j) { in(j)["accumulate"] = nullptr; },
                     {"streams.vector[1].accumulate: expected a boolean"});
  expect_error_after([&](json& j) { in(j)["operand1"] = "x"; },
                     {"streams.vector[1].operand1: expected a number or an access pattern object"});
  expect_error_after([&](json& j) { in(j)["imm"] = "1"; },
                     {"streams.vector[1].imm: expected a number"});
  expect_error_after(
      [&](json& j) {
        in(j)["iota_steps"] = {1, 2, 3, 4, 5};
      },
      {"streams.vector[1].iota_steps: expected up to 4 integers"});
  expect_error_after(
      [&](json& j) {
        in(j)["iota_steps"] = {1, 0.5};
      },
      {"streams.vector[1].iota_steps[1]: expected an integer"});
  expect_error_after([](json& j) { j["hbm_regions"] = json::object(); },
                     {"hbm_regions: expected an array"});
  expect_error_after([](json& j) { j["hbm_regions"][0] = 4096; },
                     {"hbm_regions[0]: expected an object"});
  expect_error_after([](json& j) { j["hbm_regions"][0]["name"] = 1; },
                     {"hbm_regions[0].name: expected a string"});
  expect_error_after([](json& j) { j["hbm_regions"][0]["bytes"] = -1; },
                     {"hbm_regions[0].bytes: -1 is out of range"});
}

TEST(ProgramJson, UnknownFields) {
  expect_error_after([](json& j) { j["stream"] = json::object(); },
                     {"stream: unknown program field"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["bogus"] = 1; },
                     {"streams.vector[1].bogus: unknown instruction field"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["src0"]["stride"] = 1; },
                     {"streams.vector[1].src0.stride: unknown access pattern field"});
  expect_error_after([](json& j) { j["streams"]["vector"][1]["operand0"]["size"] = 1; },
                     {"streams.vector[1].operand0.size: unknown access pattern field"});
  expect_error_after([](json& j) { j["hbm_regions"][0]["size"] = 1; },
                     {"hbm_regions[0].size: unknown region field"});
}

TEST(ProgramJson, MissingFields) {
  expect_error_after([](json& j) { j["streams"]["vector"][1].erase("op"); },
                     {"streams.vector[1]: missing \"op\""});
  // A missing operand would silently read or write sbuf[0:1] as fp32.
  expect_error_after([](json& j) { j["streams"]["vector"][1].erase("src0"); },
                     {"streams.vector[1]: missing \"src0\" (required by tensor_scalar)"});
  expect_error_after([](json& j) { j["streams"]["gpsimd"][0].erase("dst"); },
                     {"streams.gpsimd[0]: missing \"dst\" (required by iota)"});
  expect_error_after([](json& j) { j["streams"]["scalar"][0].erase("func"); },
                     {"streams.scalar[0]: missing \"func\" (required by activation)"});
  expect_error_after([](json& j) { j["streams"]["vector"][0].erase("value"); },
                     {"streams.vector[0]: missing \"value\" (required by sem_wait)"});
  expect_error_after([](json& j) { j["streams"]["dma0"][1].erase("sem"); },
                     {"streams.dma0[1]: missing \"sem\" (required by sem_signal)"});
  for (const char* key : {"space", "dtype", "partitions"}) {
    expect_error_after([&](json& j) { j["streams"]["dma0"][0]["src0"].erase(key); },
                       {"streams.dma0[0].src0: missing \"" + std::string(key) + "\""});
  }
  // Everything else in an AP defaults to zero / no free dims.
  json j = base();
  for (const char* key : {"start", "offset", "dims"}) j["streams"]["vector"][1]["dst"].erase(key);
  Program p = parse_program(j.dump());
  const AccessPattern& dst = p.stream({EngineKind::kVector, 0}).instructions[1].dst;
  EXPECT_EQ(dst.start_partition, 0u);
  EXPECT_EQ(dst.offset, 0u);
  EXPECT_EQ(dst.ndims, 0);
}

TEST(ProgramJson, OutOfRangeNumbers) {
  auto in = [](json& j) -> json& { return j["streams"]["vector"][1]; };
  auto sem = [](json& j) -> json& { return j["streams"]["vector"][0]; };
  expect_error_after([&](json& j) { sem(j)["sem"] = 65536; },
                     {"streams.vector[0].sem: 65536 is out of range [0, 65535]"});
  expect_error_after([&](json& j) { sem(j)["sem"] = -1; },
                     {"streams.vector[0].sem: -1 is out of range [0, 65535]"});
  expect_error_after([&](json& j) { sem(j)["value"] = int64_t{1} << 31; },
                     {"streams.vector[0].value: 2147483648 is out of range"});
  expect_error_after([&](json& j) { in(j)["dst"]["start"] = -1; },
                     {"streams.vector[1].dst.start: -1 is out of range"});
  expect_error_after([&](json& j) { in(j)["dst"]["start"] = k2p20 + 1; },
                     {"streams.vector[1].dst.start: 1048577 is out of range [0, 1048576]"});
  expect_error_after([&](json& j) { in(j)["dst"]["partitions"] = k2p30 + 1; },
                     {"streams.vector[1].dst.partitions: 1073741825 is out of range"});
  expect_error_after([&](json& j) { in(j)["dst"]["offset"] = k2p50 + 1; },
                     {"streams.vector[1].dst.offset: 1125899906842625 is out of range"});
  // Past int64: the message shows the number as written, not a wrapped one.
  expect_error(base().dump().replace(base().dump().find("\"offset\":0"), 10,
                                     "\"offset\":18446744073709551615"),
               {"offset: 18446744073709551615 is out of range"});
  expect_error_after([&](json& j) { in(j)["dst"]["dims"][0][0] = k2p32 + 1; },
                     {"streams.vector[1].dst.dims[0][0]: 4294967297 is out of range"});
  expect_error_after([&](json& j) { in(j)["dst"]["dims"][0][1] = -4; },
                     {"streams.vector[1].dst.dims[0][1]: -4 is out of range"});
  expect_error_after(
      [&](json& j) { j["streams"]["dma0"][0]["src0"]["partition_stride"] = -k2p40 - 1; },
      {"streams.dma0[0].src0.partition_stride: -1099511627777 is out of range"});
  expect_error_after([&](json& j) { in(j)["reduce_axes"] = 9; },
                     {"streams.vector[1].reduce_axes: 9 is out of range [0, 8]"});
  expect_error_after([&](json& j) { in(j)["iota_base"] = int64_t{1} << 31; },
                     {"streams.vector[1].iota_base: 2147483648 is out of range"});
  // Floats beyond fp32 would silently become inf.
  expect_error_after([&](json& j) { in(j)["imm"] = 1e39; },
                     {"streams.vector[1].imm: 1e+39 is out of range for fp32"});
  expect_error_after([&](json& j) { in(j)["operand1"] = -1e300; },
                     {"streams.vector[1].operand1: -1e+300 is out of range for fp32"});
  // The largest fp32 is fine.
  json j = base();
  in(j)["imm"] = std::numeric_limits<float>::max();
  EXPECT_EQ(parse_program(j.dump()).stream({EngineKind::kVector, 0}).instructions[1].imm,
            std::numeric_limits<float>::max());
}

// C++ callers can build JSON with non-finite numbers; the parser must not pass them through.
TEST(ProgramJson, NonFiniteFromCpp) {
  json j = base();
  j["streams"]["vector"][1]["imm"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(program_from_json(j), ProgramFormatError);
  j = base();
  j["streams"]["vector"][1]["operand0"] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(program_from_json(j), ProgramFormatError);
}

}  // namespace
}  // namespace neuronsim::device_model
