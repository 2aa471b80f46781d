#include "neuronsim/device_model/program_json.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"

namespace neuronsim::device_model {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ProgramFormatError(fmt::format("{}: {}", path, what));
}

template <typename T>
T get_number(const json& j, const std::string& path, T lo, T hi) {
  if (!j.is_number()) bad(path, "expected a number");
  if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) bad(path, "expected an integer");
    // Compared in 128 bits: non-negative literals parse as uint64 (2^64-1 must not pass as -1),
    // and [lo, hi] may be the whole uint64 range.
    const __int128 x = j.is_number_unsigned() ? static_cast<__int128>(j.get<uint64_t>())
                                              : static_cast<__int128>(j.get<int64_t>());
    if (x < static_cast<__int128>(lo) || x > static_cast<__int128>(hi)) {
      bad(path, j.is_number_unsigned()
                    ? fmt::format("{} is out of range [{}, {}]", j.get<uint64_t>(), lo, hi)
                    : fmt::format("{} is out of range [{}, {}]", j.get<int64_t>(), lo, hi));
    }
    return static_cast<T>(x);
  } else {
    // A double beyond the float range would silently become inf.
    const double v = j.get<double>();
    if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<T>::max()) {
      bad(path, fmt::format("{} is out of range for fp32", v));
    }
    return static_cast<T>(v);
  }
}

std::string get_string(const json& j, const std::string& path) {
  if (!j.is_string()) bad(path, "expected a string");
  return j.get<std::string>();
}

template <typename E>
E get_enum(const json& j, const std::string& path, std::optional<E> (*parse)(std::string_view),
           std::string_view kind) {
  const std::string s = get_string(j, path);
  auto v = parse(s);
  if (!v) bad(path, fmt::format("unknown {} '{}'", kind, s));
  return *v;
}

std::optional<MemSpace> parse_space(std::string_view s) {
  for (MemSpace m : {MemSpace::kHbm, MemSpace::kSbuf, MemSpace::kPsum}) {
    if (mem_space_name(m) == s) return m;
  }
  return std::nullopt;
}

json scalar_to_json(const ScalarOperand& s) {
  return s.from_ap ? access_pattern_to_json(s.ap) : json(s.imm);
}

ScalarOperand scalar_from_json(const json& j, const std::string& path) {
  ScalarOperand s;
  if (j.is_number()) {
    s.imm = get_number<float>(j, path, 0, 0);
  } else if (j.is_object()) {
    s.from_ap = true;
    s.ap = access_pattern_from_json(j, path);
  } else {
    bad(path, "expected a number or an access pattern object");
  }
  return s;
}

// Fields without a meaningful default: a missing operand would silently read or write
// sbuf[0:1]+0 as fp32, a missing semaphore would use semaphore 0.
std::vector<std::string_view> required_fields(Opcode op) {
  switch (op) {
    case Opcode::kMatmul:
    case Opcode::kTensorTensor:
    case Opcode::kSelect:
      return {"dst", "src0", "src1"};
    case Opcode::kActivation:
      return {"dst", "src0", "func"};
    case Opcode::kTensorReduce:
      return {"dst", "src0", "reduce"};
    case Opcode::kTranspose:
    case Opcode::kTensorScalar:
    case Opcode::kTensorCopy:
    case Opcode::kDmaCopy:
      return {"dst", "src0"};
    case Opcode::kIota:
    case Opcode::kMemset:
    case Opcode::kRng:
      return {"dst"};
    case Opcode::kSemWait:
    case Opcode::kSemSignal:
      return {"sem", "value"};
  }
  return {};
}

}  // namespace

json access_pattern_to_json(const AccessPattern& ap) {
  json j;
  j["space"] = mem_space_name(ap.space);
  j["dtype"] = dtype_name(ap.dtype);
  if (ap.space == MemSpace::kHbm) {
    j["partition_stride"] = ap.partition_stride;
  } else {
    j["start"] = ap.start_partition;
  }
  j["partitions"] = ap.partitions;
  j["offset"] = ap.offset;
  json dims = json::array();
  for (int k = 0; k < ap.ndims; ++k) dims.push_back({ap.dims[k].stride, ap.dims[k].size});
  j["dims"] = dims;
  return j;
}

AccessPattern access_pattern_from_json(const json& j, const std::string& path) {
  if (!j.is_object()) bad(path, "expected an access pattern object");
  // No silent defaults for what the tensor is; start, offset, strides and dims default to zero.
  for (const char* key : {"space", "dtype", "partitions"}) {
    if (!j.contains(key)) bad(path, fmt::format("missing \"{}\"", key));
  }
  AccessPattern ap;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string p = path + "." + it.key();
    const std::string& k = it.key();
    if (k == "space")
      ap.space = get_enum<MemSpace>(*it, p, parse_space, "memory space");
    else if (k == "dtype")
      ap.dtype = get_enum<DType>(*it, p, parse_dtype, "dtype");
    else if (k == "start")
      ap.start_partition = get_number<uint32_t>(*it, p, 0, 1u << 20);
    else if (k == "partitions")
      ap.partitions = get_number<uint32_t>(*it, p, 0, 1u << 30);
    else if (k == "partition_stride")
      ap.partition_stride = get_number<int64_t>(*it, p, -(1ll << 40), 1ll << 40);
    else if (k == "offset")
      ap.offset = get_number<uint64_t>(*it, p, 0, 1ull << 50);
    else if (k == "dims") {
      if (!it->is_array()) bad(p, "expected an array of [stride, size] pairs");
      if (it->size() > kMaxFreeDims) bad(p, fmt::format("at most {} free dims", kMaxFreeDims));
      ap.ndims = static_cast<uint8_t>(it->size());
      for (size_t d = 0; d < it->size(); ++d) {
        const json& pair = (*it)[d];
        const std::string pp = fmt::format("{}[{}]", p, d);
        if (!pair.is_array() || pair.size() != 2) bad(pp, "expected [stride, size]");
        ap.dims[d].stride = get_number<int64_t>(pair[0], pp + "[0]", -(1ll << 32), 1ll << 32);
        ap.dims[d].size = get_number<uint32_t>(pair[1], pp + "[1]", 0, 1u << 30);
      }
    } else {
      bad(p, "unknown access pattern field");
    }
  }
  return ap;
}

json program_to_json(const Program& program) {
  json j;
  j["name"] = program.name;
  if (program.grid != 1) j["grid"] = program.grid;
  json regions = json::array();
  for (const auto& r : program.hbm_regions) {
    regions.push_back({{"name", r.name}, {"offset", r.offset}, {"bytes", r.bytes}});
  }
  j["hbm_regions"] = regions;
  json streams = json::object();
  const Instruction def;
  for (const Stream& s : program.streams) {
    json list = json::array();
    for (const Instruction& in : s.instructions) {
      json o;
      o["op"] = opcode_name(in.op);
      if (in.is_sync()) {
        o["sem"] = in.sem;
        o["value"] = in.sem_value;
        if (in.sem_pcore >= 0) o["pcore"] = in.sem_pcore;
        list.push_back(o);
        continue;
      }
      o["dst"] = access_pattern_to_json(in.dst);
      if (in.op != Opcode::kMemset && in.op != Opcode::kIota && in.op != Opcode::kRng) {
        o["src0"] = access_pattern_to_json(in.src0);
      }
      if (in.op == Opcode::kMatmul || in.op == Opcode::kTensorTensor || in.op == Opcode::kSelect) {
        o["src1"] = access_pattern_to_json(in.src1);
      }
      if (in.has_src2) o["src2"] = access_pattern_to_json(in.src2);
      if (in.has_acc_dst) o["acc_dst"] = access_pattern_to_json(in.acc_dst);
      if (in.alu0 != def.alu0) o["alu0"] = alu_op_name(in.alu0);
      if (in.alu1 != def.alu1) o["alu1"] = alu_op_name(in.alu1);
      if (in.op == Opcode::kTensorScalar || in.op == Opcode::kActivation) {
        // Written always: their defaults differ between opcodes (activation scale is 1).
        o["operand0"] = scalar_to_json(in.operand0);
        o["operand1"] = scalar_to_json(in.operand1);
      }
      if (in.reverse0) o["reverse0"] = true;
      if (in.reverse1) o["reverse1"] = true;
      if (in.op == Opcode::kActivation) o["func"] = act_func_name(in.func);
      if (in.op == Opcode::kTensorReduce) {
        o["reduce"] = reduce_op_name(in.reduce);
        o["reduce_axes"] = in.reduce_axes;
      }
      if (in.accumulate) o["accumulate"] = true;
      if (in.perf_mode == MatmulPerfMode::kDoubleRow) o["perf_mode"] = "double_row";
      if (in.op == Opcode::kMemset || (in.op == Opcode::kSelect && !in.has_src2)) o["imm"] = in.imm;
      if (in.op == Opcode::kRng) {
        o["dist"] = rng_dist_name(in.rng_dist);
        o["imm"] = in.imm;
        o["imm2"] = in.imm2;
        o["rng_seed"] = in.rng_seed;
        o["rng_offset"] = in.rng_offset;
        o["rng_base"] = in.rng_base;
      }
      if (in.op == Opcode::kIota) {
        o["iota_base"] = in.iota_base;
        o["iota_channel_multiplier"] = in.iota_channel_multiplier;
        o["iota_steps"] = in.iota_steps;
      }
      list.push_back(o);
    }
    streams[s.id.name()] = list;
  }
  j["streams"] = streams;
  return j;
}

Program program_from_json(const json& j) {
  if (!j.is_object()) bad("$", "a program must be a JSON object");
  Program prog;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "name")
      prog.name = get_string(*it, "name");
    else if (k == "grid")
      prog.grid = get_number<uint32_t>(*it, "grid", 1, 255);
    else if (k == "hbm_regions") {
      if (!it->is_array()) bad("hbm_regions", "expected an array");
      for (size_t i = 0; i < it->size(); ++i) {
        const json& r = (*it)[i];
        const std::string p = fmt::format("hbm_regions[{}]", i);
        if (!r.is_object()) bad(p, "expected an object");
        HbmRegion reg;
        for (auto f = r.begin(); f != r.end(); ++f) {
          if (f.key() == "name")
            reg.name = get_string(*f, p + ".name");
          else if (f.key() == "offset")
            reg.offset = get_number<uint64_t>(*f, p + ".offset", 0, 1ull << 50);
          else if (f.key() == "bytes")
            reg.bytes = get_number<uint64_t>(*f, p + ".bytes", 0, 1ull << 50);
          else if (f.key() == "init" || f.key() == "output")
            continue;  // read by tools
          else
            bad(p + "." + f.key(), "unknown region field");
        }
        prog.hbm_regions.push_back(reg);
      }
    } else if (k == "streams") {
      if (!it->is_object()) bad("streams", "expected an object of stream name -> instructions");
      for (auto s = it->begin(); s != it->end(); ++s) {
        const std::string sp = "streams." + s.key();
        auto id = parse_stream_id(s.key());
        // Only the canonical spelling: "dma07" and "dma7" would silently merge into one stream.
        if (!id || id->name() != s.key()) {
          bad(sp,
              "unknown stream name (tensor, vector, scalar, gpsimd, dma0 ... dma15, "
              "pcore1.<stream> ...)");
        }
        if (!s->is_array()) bad(sp, "expected an array of instructions");
        Stream& stream = prog.stream(*id);
        for (size_t i = 0; i < s->size(); ++i) {
          const json& o = (*s)[i];
          const std::string p = fmt::format("{}[{}]", sp, i);
          if (!o.is_object()) bad(p, "expected an instruction object");
          if (!o.contains("op")) bad(p, "missing \"op\"");
          Instruction in;
          in.op = get_enum<Opcode>(o["op"], p + ".op", parse_opcode, "opcode");
          // An activation's scale defaults to 1 (func(in * 1 + 0)), as in isa::activation().
          if (in.op == Opcode::kActivation) in.operand0.imm = 1.0f;
          for (std::string_view key : required_fields(in.op)) {
            if (!o.contains(key)) {
              bad(p, fmt::format("missing \"{}\" (required by {})", key, opcode_name(in.op)));
            }
          }
          for (auto f = o.begin(); f != o.end(); ++f) {
            const std::string& fk = f.key();
            const std::string fp = p + "." + fk;
            if (fk == "op")
              continue;
            else if (fk == "dst")
              in.dst = access_pattern_from_json(*f, fp);
            else if (fk == "src0")
              in.src0 = access_pattern_from_json(*f, fp);
            else if (fk == "src1")
              in.src1 = access_pattern_from_json(*f, fp);
            else if (fk == "src2") {
              in.src2 = access_pattern_from_json(*f, fp);
              in.has_src2 = true;
            } else if (fk == "acc_dst") {
              in.acc_dst = access_pattern_from_json(*f, fp);
              in.has_acc_dst = true;
            } else if (fk == "alu0")
              in.alu0 = get_enum<AluOp>(*f, fp, parse_alu_op, "ALU operator");
            else if (fk == "alu1")
              in.alu1 = get_enum<AluOp>(*f, fp, parse_alu_op, "ALU operator");
            else if (fk == "operand0")
              in.operand0 = scalar_from_json(*f, fp);
            else if (fk == "operand1")
              in.operand1 = scalar_from_json(*f, fp);
            else if (fk == "reverse0")
              in.reverse0 =
                  f->is_boolean() ? f->get<bool>() : (bad(fp, "expected a boolean"), false);
            else if (fk == "reverse1")
              in.reverse1 =
                  f->is_boolean() ? f->get<bool>() : (bad(fp, "expected a boolean"), false);
            else if (fk == "func")
              in.func = get_enum<ActFunc>(*f, fp, parse_act_func, "activation function");
            else if (fk == "reduce")
              in.reduce = get_enum<ReduceOp>(*f, fp, parse_reduce_op, "reduce operator");
            else if (fk == "reduce_axes")
              in.reduce_axes = get_number<uint8_t>(*f, fp, 0, 8);
            else if (fk == "accumulate")
              in.accumulate =
                  f->is_boolean() ? f->get<bool>() : (bad(fp, "expected a boolean"), false);
            else if (fk == "perf_mode") {
              if (!f->is_string() ||
                  (f->get<std::string>() != "double_row" && f->get<std::string>() != "none"))
                bad(fp, "expected \"double_row\" or \"none\"");
              in.perf_mode = f->get<std::string>() == "double_row" ? MatmulPerfMode::kDoubleRow
                                                                   : MatmulPerfMode::kNone;
            } else if (fk == "imm")
              in.imm = get_number<float>(*f, fp, 0, 0);
            else if (fk == "imm2")
              in.imm2 = get_number<float>(*f, fp, 0, 0);
            else if (fk == "dist")
              in.rng_dist = get_enum<RngDist>(*f, fp, parse_rng_dist, "rng distribution");
            else if (fk == "rng_seed")
              in.rng_seed = get_number<uint64_t>(*f, fp, 0, UINT64_MAX);
            else if (fk == "rng_offset")
              in.rng_offset = get_number<uint64_t>(*f, fp, 0, UINT64_MAX);
            else if (fk == "rng_base")
              in.rng_base = get_number<uint64_t>(*f, fp, 0, UINT64_MAX);
            else if (fk == "iota_base")
              in.iota_base = get_number<int32_t>(*f, fp, INT32_MIN, INT32_MAX);
            else if (fk == "iota_channel_multiplier")
              in.iota_channel_multiplier = get_number<int32_t>(*f, fp, INT32_MIN, INT32_MAX);
            else if (fk == "iota_steps") {
              if (!f->is_array() || f->size() > kMaxFreeDims) bad(fp, "expected up to 4 integers");
              for (size_t d = 0; d < f->size(); ++d) {
                in.iota_steps[d] = get_number<int32_t>((*f)[d], fmt::format("{}[{}]", fp, d),
                                                       INT32_MIN, INT32_MAX);
              }
            } else if (fk == "sem")
              in.sem = get_number<uint16_t>(*f, fp, 0, 65535);
            else if (fk == "value")
              in.sem_value = get_number<int32_t>(*f, fp, INT32_MIN, INT32_MAX);
            else if (fk == "pcore")
              in.sem_pcore = get_number<int8_t>(*f, fp, -1, 127);
            else
              bad(fp, "unknown instruction field");
          }
          stream.instructions.push_back(in);
        }
      }
    } else if (k == "inputs" || k == "outputs" || k == "description") {
      continue;  // tool-level data descriptions, read by ncsim
    } else {
      bad(k, "unknown program field");
    }
  }
  return prog;
}

Program parse_program(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for e.g. 1e400
    throw ProgramFormatError(fmt::format("not valid JSON: {}", e.what()));
  }
  return program_from_json(j);
}

}  // namespace neuronsim::device_model
