// neuronsim._C's NKI entry points (see nki_bindings.h). The kernel arrives as plain Python
// tuples (python/neuronsim/nki/_lowering.py writes them); everything here is conversion and the
// launch, the expansion itself is kernels/nki (torch-free).
#include "python/nki_bindings.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <map>

#include "accelerator/context.h"
#include "aten/capture_mode.h"
#include "aten/native_boxed.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/nki/lower.h"
#include "neuronsim/runtime/device_sinks.h"
#include "neuronsim/runtime/trace_session.h"
#include "profiler/activity_recorder.h"

namespace py = pybind11;

namespace neuronsim::backend {
namespace {

using kernels::nki::Affine;
using kernels::nki::Kernel;
using kernels::nki::Operand;

device_model::MemSpace space_of(int code) {
  switch (code) {
    case 0:
      return device_model::MemSpace::kHbm;
    case 1:
      return device_model::MemSpace::kSbuf;
    case 2:
      return device_model::MemSpace::kPsum;
  }
  throw std::invalid_argument("unknown memory space code");
}

Affine to_affine(const py::handle& c, const py::handle& terms) {
  Affine a;
  a.constant = c.cast<int64_t>();
  for (const auto& t : terms) {
    const auto pair = t.cast<py::tuple>();
    a.terms.emplace_back(pair[0].cast<uint32_t>(), pair[1].cast<int64_t>());
  }
  return a;
}

// (buffer, dtype, part_const, part_terms, partitions, partition_stride, off_const, off_terms,
//  dims)
Operand to_operand(const py::handle& h) {
  Operand o;
  if (h.is_none()) return o;
  const auto t = h.cast<py::tuple>();
  o.buffer = t[0].cast<int32_t>();
  const auto dt = device_model::parse_dtype(t[1].cast<std::string>());
  if (!dt) throw std::invalid_argument("unknown dtype " + t[1].cast<std::string>());
  o.dtype = *dt;
  o.start_partition = to_affine(t[2], t[3]);
  o.partitions = t[4].cast<uint32_t>();
  o.partition_stride = t[5].cast<int64_t>();
  o.offset = to_affine(t[6], t[7]);
  for (const auto& d : t[8]) {
    const auto pair = d.cast<py::tuple>();
    o.dims.push_back({pair[0].cast<int64_t>(), pair[1].cast<uint32_t>()});
  }
  return o;
}

kernels::nki::Scalar to_scalar(const py::handle& h) {
  kernels::nki::Scalar s;
  if (h.is_none()) return s;
  if (py::isinstance<py::tuple>(h)) {
    s.from_operand = true;
    s.operand = to_operand(h);
  } else {
    s.imm = h.cast<float>();
  }
  return s;
}

template <typename T>
T parse_name(const py::dict& f, const char* key, std::optional<T> (*parse)(std::string_view),
             T fallback) {
  if (!f.contains(key)) return fallback;
  const auto name = f[key].cast<std::string>();
  const auto v = parse(name);
  if (!v) throw std::invalid_argument(std::string("unknown ") + key + " " + name);
  return *v;
}

device_model::EngineKind engine_of(const std::string& e) {
  if (e == "tensor") return device_model::EngineKind::kTensor;
  if (e == "vector") return device_model::EngineKind::kVector;
  if (e == "scalar") return device_model::EngineKind::kScalar;
  if (e == "gpsimd") return device_model::EngineKind::kGpSimd;
  if (e == "dma") return device_model::EngineKind::kDma;
  throw std::invalid_argument("unknown engine " + e);
}

// (opcode, engine, source, dst, src0, src1, src2, acc_dst, operand0, operand1, fields,
//  accumulate, clamps)
kernels::nki::Op to_op(const py::handle& h) {
  const auto t = h.cast<py::tuple>();
  kernels::nki::Op op;
  const auto opcode = device_model::parse_opcode(t[0].cast<std::string>());
  if (!opcode) throw std::invalid_argument("unknown opcode " + t[0].cast<std::string>());
  op.inst.op = *opcode;
  if (!t[1].is_none()) op.engine = engine_of(t[1].cast<std::string>());
  op.source = t[2].cast<int32_t>();
  op.dst = to_operand(t[3]);
  op.src0 = to_operand(t[4]);
  op.src1 = to_operand(t[5]);
  op.src2 = to_operand(t[6]);
  op.acc_dst = to_operand(t[7]);
  op.operand0 = to_scalar(t[8]);
  op.operand1 = to_scalar(t[9]);
  device_model::Instruction& in = op.inst;
  if (!op.operand0.from_operand) in.operand0.imm = op.operand0.imm;
  if (!op.operand1.from_operand) in.operand1.imm = op.operand1.imm;
  const auto f = t[10].cast<py::dict>();
  in.alu0 = parse_name<device_model::AluOp>(f, "alu0", &device_model::parse_alu_op,
                                            device_model::AluOp::kBypass);
  in.alu1 = parse_name<device_model::AluOp>(f, "alu1", &device_model::parse_alu_op,
                                            device_model::AluOp::kBypass);
  in.func = parse_name<device_model::ActFunc>(f, "func", &device_model::parse_act_func,
                                              device_model::ActFunc::kCopy);
  in.reduce = parse_name<device_model::ReduceOp>(f, "reduce", &device_model::parse_reduce_op,
                                                 device_model::ReduceOp::kAdd);
  in.rng_dist = parse_name<device_model::RngDist>(f, "dist", &device_model::parse_rng_dist,
                                                  device_model::RngDist::kUniform);
  if (f.contains("reverse0")) in.reverse0 = f["reverse0"].cast<bool>();
  if (f.contains("reverse1")) in.reverse1 = f["reverse1"].cast<bool>();
  if (f.contains("reduce_axes")) in.reduce_axes = f["reduce_axes"].cast<uint8_t>();
  if (f.contains("imm")) in.imm = f["imm"].cast<float>();
  if (f.contains("imm2")) in.imm2 = f["imm2"].cast<float>();
  if (f.contains("iota_base")) in.iota_base = f["iota_base"].cast<int32_t>();
  if (f.contains("iota_channel_multiplier")) {
    in.iota_channel_multiplier = f["iota_channel_multiplier"].cast<int32_t>();
  }
  if (f.contains("iota_steps")) {
    const auto steps = f["iota_steps"].cast<std::vector<int32_t>>();
    for (size_t i = 0; i < steps.size() && i < in.iota_steps.size(); ++i) {
      in.iota_steps[i] = steps[i];
    }
  }
  if (f.contains("rng_seed")) in.rng_seed = f["rng_seed"].cast<uint64_t>();
  if (f.contains("rng_offset")) in.rng_offset = f["rng_offset"].cast<uint64_t>();
  if (f.contains("perf_mode") && f["perf_mode"].cast<std::string>() == "double_row") {
    in.perf_mode = device_model::MatmulPerfMode::kDoubleRow;
  }
  op.accumulate = static_cast<kernels::nki::Accumulate>(t[11].cast<int>());
  for (const auto& c : t[12]) {
    const auto ct = c.cast<py::tuple>();
    kernels::nki::Clamp clamp;
    clamp.axis = ct[0].cast<uint8_t>();
    clamp.upper = ct[1].cast<bool>();
    clamp.numerator = to_affine(ct[2], ct[3]);
    clamp.divisor = ct[4].cast<int64_t>();
    op.clamps.push_back(clamp);
  }
  return op;
}

// (name, sources, buffers, ops, body, variables, grid, core_variable)
Kernel to_kernel(const py::tuple& t) {
  Kernel k;
  k.name = t[0].cast<std::string>();
  k.sources = t[1].cast<std::vector<std::string>>();
  for (const auto& b : t[2]) {
    // (name, shape, space, partitions, bytes, hbm_address, elide_zero, source)
    const auto bt = b.cast<py::tuple>();
    kernels::nki::Buffer buf;
    buf.name = bt[0].cast<std::string>();
    buf.shape = bt[1].cast<std::string>();
    buf.space = space_of(bt[2].cast<int>());
    buf.partitions = bt[3].cast<uint32_t>();
    buf.bytes = bt[4].cast<uint64_t>();
    buf.hbm_address = bt[5].cast<uint64_t>();
    buf.elide_zero = bt[6].cast<bool>();
    buf.source = bt[7].cast<int32_t>();
    k.buffers.push_back(std::move(buf));
  }
  for (const auto& o : t[3]) k.ops.push_back(to_op(o));
  for (const auto& s : t[4]) {
    // (kind, index, trip)
    const auto st = s.cast<py::tuple>();
    kernels::nki::Stmt stmt;
    stmt.kind = static_cast<kernels::nki::StmtKind>(st[0].cast<int>());
    stmt.index = st[1].cast<uint32_t>();
    stmt.trip = st[2].cast<int64_t>();
    k.body.push_back(stmt);
  }
  k.variables = t[5].cast<uint32_t>();
  k.grid = t[6].cast<uint32_t>();
  k.core_variable = t[7].cast<int32_t>();
  k.finalize();
  return k;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// TensorE work of a program as the Neuron profiler counts it (neuron-explorer's schema: HFU
// counts every TensorE element, transposes included; MFU excludes transposes): 2*K*M*N per
// matmul; a transpose of [P, F] runs through the PE array against an identity (K = P, M = F,
// N = P).
struct TensorWork {
  uint64_t matmul_flops = 0;
  uint64_t transpose_flops = 0;
};

TensorWork tensor_work(const device_model::Program& p) {
  TensorWork w;
  for (const auto& s : p.streams) {
    if (s.id.engine != device_model::EngineKind::kTensor) continue;
    for (const auto& in : s.instructions) {
      if (in.op == device_model::Opcode::kMatmul) {
        const uint64_t k = uint64_t{in.src0.partitions} *
                           (in.perf_mode == device_model::MatmulPerfMode::kDoubleRow ? 2 : 1);
        w.matmul_flops += 2 * k * in.dst.partitions * in.dst.free_elements();
      } else if (in.op == device_model::Opcode::kTranspose) {
        const uint64_t pp = in.src0.partitions, f = in.src0.free_elements();
        w.transpose_flops += 2 * pp * f * pp;
      }
    }
  }
  return w;
}

// Busy time and instructions per (source line, engine row) of the launches it watches.
class LineStatsSink final : public sim::TraceSink {
 public:
  sim::TrackId add_track(const sim::TrackInfo& info) override {
    rows_.push_back(info.name);
    return static_cast<sim::TrackId>(rows_.size() - 1);
  }
  void slice(sim::TrackId track, std::string_view, std::string_view, sim::SimTime b, sim::SimTime e,
             const sim::TraceArgs& args) override {
    if (track >= rows_.size()) return;
    const sim::TraceArgs::Entry* src = nullptr;
    for (const sim::TraceArgs::Entry& a : args) {
      if (a.key == "src" && a.kind == sim::TraceArgs::Kind::kString) src = &a;
    }
    if (!src) return;
    auto& cell = cells_[{std::string(src->text), rows_[track]}];
    cell.first += 1;
    cell.second += (e - b).ps;
  }
  void counter(sim::TrackId, sim::SimTime, double) override {}
  void metadata(const std::string&, nlohmann::json) override {}

  py::list rows() const {
    py::list out;
    for (const auto& [key, v] : cells_) {
      py::dict d;
      d["src"] = key.first;
      d["engine"] = key.second;
      d["instructions"] = v.first;
      d["busy_us"] = static_cast<double>(v.second) / 1e6;
      out.append(d);
    }
    return out;
  }

 private:
  std::vector<std::string> rows_;
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> cells_;
};

// Engine busy times (ps) of the physical cores from `core` on, from the device's statistics.
std::map<std::string, double> engine_busy_ps(runtime::Runtime& r, uint32_t core, uint32_t grid) {
  std::map<std::string, double> out;
  const auto& stats = r.device().stats();
  const uint32_t queues = r.device().params().core.dma.queues;
  const std::pair<const char*, const char*> engines[] = {
      {"tensor", "TensorE"}, {"vector", "VectorE"}, {"scalar", "ScalarE"}, {"gpsimd", "GpSimdE"}};
  for (uint32_t p = 0; p < grid; ++p) {
    const std::string pre = grid > 1 ? fmt::format("pcore{} ", p) : "";
    for (const auto& [key, name] : engines) {
      out[pre + name] += stats.value(fmt::format("nc{}.{}.busy_ps", core + p, key));
    }
    double sum = 0, busiest = 0;
    for (uint32_t q = 0; q < queues; ++q) {
      const double v = stats.value(fmt::format("nc{}.dma{}.busy_ps", core + p, q));
      sum += v;
      busiest = std::max(busiest, v);
    }
    out[pre + "DMA (busiest queue)"] += busiest;
    out[pre + "DMA (queues summed)"] += sum;
  }
  return out;
}

py::dict launch(const py::tuple& kernel_tuple, bool full, int device_index, bool line_stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const Kernel kernel = to_kernel(kernel_tuple);
  const double convert_s = seconds_since(t0);
  py::dict out;
  // Lowered outside the runtime lock: a KernelError reaches Python as NkiKernelError, not as
  // the RuntimeError the lock's translation would make of it.
  const device_model::CoreParams core =
      with_runtime([](runtime::Runtime& r) { return r.device().params().core; });
  const auto t1 = std::chrono::steady_clock::now();
  kernels::nki::LowerStats stats;
  const device_model::Program program = kernels::nki::lower(kernel, core, &stats);
  const double lower_s = seconds_since(t1);
  const TensorWork work = tensor_work(program);
  out["instructions"] = stats.instructions;
  out["semaphore_waits"] = stats.semaphore_waits;
  out["sbuf_peak_bytes"] = stats.sbuf_peak_bytes;
  out["psum_peak_bytes"] = stats.psum_peak_bytes;
  out["tensor_flops"] = work.matmul_flops + work.transpose_flops;  // HFU's numerator
  out["model_flops"] = work.matmul_flops;                          // MFU's
  out["convert_seconds"] = convert_s;
  out["lower_seconds"] = lower_s;
  out["expand_seconds"] = stats.expand_seconds;
  out["validate_seconds"] = stats.validate_seconds;
  out["captured"] = false;
  const auto dev = static_cast<c10::DeviceIndex>(device_index);
  with_runtime([&](runtime::Runtime& r) {
    const uint32_t d = static_cast<uint32_t>(dev);
    out["peak_flops"] = r.device().params().tensor_peak_flops();
    if (capture_mode() != CaptureMode::kOff) {
      // Inside a compiled graph (an eager node of its launch, graph_capture.h): the kernel's
      // values now (functional: the clock does not move), its time in the graph's launch.
      r.device().set_mode(device_model::ExecMode::kFunctional);
      r.device().run(r.physical_core(d), program);
      launch_programs(c10::Device(c10::DeviceType::PrivateUse1, dev), {program}, full);
      out["captured"] = true;
      return 0;
    }
    const auto t2 = std::chrono::steady_clock::now();
    const int64_t stream = current_stream(dev).id();
    const sim::SimTime h0 = r.host_time();
    r.host_advance(sim::SimTime::from_ns(r.device().params().host.kernel_launch_overhead_ns));
    const uint32_t first = r.physical_core(d);
    const auto before = engine_busy_ps(r, first, program.grid);
    LineStatsSink lines;
    if (line_stats) runtime::set_device_sink(r, runtime::SinkRole::kKernelLines, &lines);
    device_model::RunResult res;
    try {
      // lower() validated the program against the chip's rules and kept every HBM access
      // inside its tensor (live device memory): no second validation.
      res = r.launch(d, stream, program, full, /*validated=*/true);
    } catch (...) {
      if (line_stats) runtime::set_device_sink(r, runtime::SinkRole::kKernelLines, nullptr);
      throw;
    }
    if (line_stats) {
      runtime::set_device_sink(r, runtime::SinkRole::kKernelLines, nullptr);
      out["lines"] = lines.rows();
    }
    py::dict engines;
    for (const auto& [name, ps] : engine_busy_ps(r, first, program.grid)) {
      engines[py::str(name)] = (ps - before.at(name)) / 1e6;  // microseconds
    }
    out["engines"] = engines;
    if (runtime::TraceSession* trace = runtime::TraceSession::active()) {
      trace->host("launch " + program.name, "launch", h0, r.host_time());
      for (const auto& c : res.cores) trace->kernel(c.core, c.start, c.end);
    }
    ActivityRecorder::get().on_launch(program.name, res);
    out["run_seconds"] = seconds_since(t2);
    out["start_ns"] = res.start.ns();
    out["end_ns"] = res.end.ns();
    return 0;
  });
  return out;
}

}  // namespace

void bind_nki(py::module_& m) {
  py::register_exception<kernels::nki::KernelError>(m, "NkiKernelError", PyExc_ValueError);
  // The limits a kernel is checked against at trace time, from the preset in force.
  m.def("_nki_core_params", [] {
    return with_runtime([](runtime::Runtime& r) {
      const auto& chip = r.device().params();
      const auto& c = chip.core;
      py::dict d;
      d["preset"] = chip.preset_name;
      d["sbuf_partitions"] = c.sbuf.partitions;
      d["sbuf_partition_bytes"] = c.sbuf.partition_bytes;
      d["psum_partitions"] = c.psum.partitions;
      d["psum_partition_bytes"] = c.psum.partition_bytes;
      d["psum_bank_bytes"] = c.psum.bank_bytes();
      d["tensor_rows"] = c.tensor.rows;
      d["tensor_columns"] = c.tensor.columns;
      d["moving_free_max"] = c.tensor.moving_free_max;
      d["dma_queues"] = c.dma.queues;
      d["logical_core_size"] = chip.logical_core_size;
      d["tensor_peak_flops"] = chip.tensor_peak_flops();
      d["fp8_double_row"] = c.tensor.fp8_double_row_cost_factor > 0;
      return d;
    });
  });
  m.def("_nki_launch", &launch, py::arg("kernel"), py::arg("full"), py::arg("device") = 0,
        py::arg("line_stats") = false);
  // The kernel library's GEMM (A given as A^T [k, m]) timing-only at given HBM addresses: what
  // bench/nki_matmul_bench.py compares the NKI matmul kernels with.
  m.def("_nki_library_gemm", [](uint32_t m_, uint32_t k_, uint32_t n_, uint64_t a_t, uint64_t b,
                                uint64_t c, const std::string& dtype, int dev) {
    const auto dt = device_model::parse_dtype(dtype);
    if (!dt) throw std::invalid_argument("unknown dtype " + dtype);
    return with_runtime([&](runtime::Runtime& r) {
      kernels::GemmSpec spec;
      spec.m = m_, spec.k = k_, spec.n = n_;
      spec.in_dtype = spec.out_dtype = *dt;
      kernels::GemmAddresses ad;
      ad.a_t = a_t, ad.b = b, ad.c = c;
      const auto t0 = std::chrono::steady_clock::now();
      const device_model::Program p = kernels::build_gemm(spec, ad, r.device().params().core);
      const double build_s = seconds_since(t0);
      const auto t1 = std::chrono::steady_clock::now();
      const auto d = static_cast<c10::DeviceIndex>(dev);
      const device_model::RunResult res =
          r.launch(static_cast<uint32_t>(dev), current_stream(d).id(), p, false);
      const TensorWork work = tensor_work(p);
      py::dict out;
      out["instructions"] = p.instruction_count();
      out["build_seconds"] = build_s;
      out["run_seconds"] = seconds_since(t1);
      out["start_ns"] = res.start.ns();
      out["end_ns"] = res.end.ns();
      out["tensor_flops"] = work.matmul_flops + work.transpose_flops;
      return out;
    });
  });
  // HBM for a kernel's numpy arguments and outputs: (device pointer, HBM address).
  m.def("_nki_hbm_alloc", [](uint64_t bytes, int dev) {
    return with_runtime([&](runtime::Runtime& r) {
      void* p = r.malloc(static_cast<uint32_t>(dev), std::max<uint64_t>(bytes, 1));
      return py::make_tuple(reinterpret_cast<uintptr_t>(p), r.hbm_address(p));
    });
  });
  m.def("_nki_hbm_free", [](uintptr_t ptr) { free_device_memory(reinterpret_cast<void*>(ptr)); });
  m.def("_nki_hbm_address", [](uintptr_t ptr) {
    return with_runtime(
        [&](runtime::Runtime& r) { return r.hbm_address(reinterpret_cast<void*>(ptr)); });
  });
  m.def("_nki_hbm_write", [](uintptr_t ptr, py::buffer data) {
    const py::buffer_info info = data.request();
    const auto bytes = static_cast<size_t>(info.size * info.itemsize);
    std::memcpy(reinterpret_cast<void*>(ptr), info.ptr, bytes);
  });
  m.def("_nki_hbm_read", [](uintptr_t ptr, size_t bytes) {
    return py::bytes(reinterpret_cast<const char*>(ptr), bytes);
  });
}

}  // namespace neuronsim::backend
