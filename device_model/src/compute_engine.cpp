#include "compute_engine.h"

#include <cmath>

#include <fmt/format.h>

#include "neuronsim/device_model/executor.h"
#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {
namespace {

double engine_frequency(const CoreParams& c, EngineKind k) {
  switch (k) {
    case EngineKind::kTensor:
      return c.tensor.frequency_hz;
    case EngineKind::kVector:
      return c.vector.frequency_hz;
    case EngineKind::kScalar:
      return c.scalar.frequency_hz;
    case EngineKind::kGpSimd:
      return c.gpsimd.frequency_hz;
    case EngineKind::kDma:
      break;
  }
  return 1e9;
}

bool overlaps(MemSpace space, uint32_t p0, uint32_t p1, int64_t lo, int64_t hi, MemSpace s2,
              uint32_t q0, uint32_t q1, int64_t lo2, int64_t hi2) {
  return space == s2 && p0 < q1 && q0 < p1 && lo < hi2 && lo2 < hi;
}

// A tensor_scalar's two ALU ops, "add,mult" in the trace.
struct AluPair {
  AluOp first, second;
};
void append_alu_pair(const AluPair& p, std::string& out) {
  out += alu_op_name(p.first);
  out += ',';
  out += alu_op_name(p.second);
}

// An instruction's operands for its trace slice: names and access patterns are formatted by the
// sink that writes them (not on the simulating thread). `alus` holds the ALU pair it refers to.
sim::TraceArgs describe(const Instruction& in, AluPair& alus) {
  using AP = AccessPattern;
  sim::TraceArgs a;
  a.add_deferred<AP, &AP::append_text>("dst", in.dst);
  switch (in.op) {
    case Opcode::kMatmul:
      a.add_deferred<AP, &AP::append_text>("stationary", in.src0);
      a.add_deferred<AP, &AP::append_text>("moving", in.src1);
      a.add({"accumulate", in.accumulate});
      break;
    case Opcode::kTensorTensor:
      a.add_deferred<AP, &AP::append_text>("src0", in.src0);
      a.add_deferred<AP, &AP::append_text>("src1", in.src1);
      a.add({"op", alu_op_name(in.alu0)});
      break;
    case Opcode::kTensorScalar:
      a.add_deferred<AP, &AP::append_text>("src0", in.src0);
      alus = {in.alu0, in.alu1};
      a.add_deferred<AluPair, &append_alu_pair>("op", alus);
      break;
    case Opcode::kActivation:
      a.add_deferred<AP, &AP::append_text>("src0", in.src0);
      a.add({"func", act_func_name(in.func)});
      break;
    case Opcode::kTensorReduce:
      a.add_deferred<AP, &AP::append_text>("src0", in.src0);
      a.add({"op", reduce_op_name(in.reduce)});
      break;
    case Opcode::kMemset:
    case Opcode::kIota:
      break;
    case Opcode::kRng:
      a.add({"dist", rng_dist_name(in.rng_dist)});
      break;
    default:
      a.add_deferred<AP, &AP::append_text>("src0", in.src0);
  }
  return a;
}

}  // namespace

ComputeEngine::ComputeEngine(sc_core::sc_module_name name, CoreContext& ctx, EngineKind kind)
    : StreamEngine(name, ctx, StreamId{kind, 0}),
      cost_(make_cost_model(kind, *ctx.core)),
      clock_(std::string(engine_kind_name(kind)), engine_frequency(*ctx.core, kind)),
      unit_row_(engine_info(kind).unit_row) {
  // Its instructions only read and write this engine's timelines (inputs_ready, engine_free_,
  // the LoadStationary unit); other engines see its results through semaphores.
  may_defer_waits_ = true;
  const std::string p = fmt::format("nc{}.{}.", ctx.index, engine_kind_name(kind));
  instructions_ = &ctx.stats->counter(p + "instructions", "count", "data instructions executed");
  busy_ps_ = &ctx.stats->counter(p + "busy_ps", "ps", "time the engine was occupied");
  busy_cycles_ = &ctx.stats->counter(
      p + "busy_cycles", "cycle", "engine cycles occupied (the cost models' sum, at this clock)");
  flops_ = &ctx.stats->counter(p + "flops", "flop", "floating-point operations (matmul)");
}

sim::SimTime ComputeEngine::data_ready(const AccessPattern& ap) const {
  sim::SimTime t;
  const auto span = ap.byte_span();
  const uint32_t p0 = ap.start_partition, p1 = ap.start_partition + ap.partitions;
  for (const Written& w : written_) {
    if (w.p1 > w.p0 &&
        overlaps(ap.space, p0, p1, span.lo, span.hi, w.space, w.p0, w.p1, w.lo, w.hi)) {
      t = sim::max(t, w.ready);
    }
  }
  return t;
}

sim::SimTime ComputeEngine::inputs_ready(const Instruction& in) const {
  sim::SimTime t;
  switch (in.op) {
    case Opcode::kMemset:
    case Opcode::kIota:
    case Opcode::kRng:
      break;
    case Opcode::kMatmul:
    case Opcode::kTensorTensor:
      // PSUM accumulation happens near memory, in order: an accumulating matmul does not wait
      // for the previous one's result.
      t = sim::max(data_ready(in.src0), data_ready(in.src1));
      break;
    case Opcode::kSelect:
      t = sim::max(data_ready(in.src0), data_ready(in.src1));
      if (in.has_src2) t = sim::max(t, data_ready(in.src2));
      break;
    default:
      t = data_ready(in.src0);
  }
  if (in.operand0.from_ap) t = sim::max(t, data_ready(in.operand0.ap));
  if (in.operand1.from_ap) t = sim::max(t, data_ready(in.operand1.ap));
  return t;
}

void ComputeEngine::record_write(const AccessPattern& ap, sim::SimTime ready) {
  const auto span = ap.byte_span();
  written_[written_next_] = {
      ap.space, ap.start_partition, ap.start_partition + ap.partitions, span.lo, span.hi, ready};
  written_next_ = (written_next_ + 1) % written_.size();
}

void ComputeEngine::update_occupancy(const AccessPattern& ap, sim::SimTime t) {
  const auto span = ap.byte_span();
  const bool sbuf = ap.space == MemSpace::kSbuf;
  OccupancyTracker& occ = sbuf ? ctx_.sbuf_occupancy : ctx_.psum_occupancy;
  const uint64_t before = occ.total();
  const uint64_t after = occ.add(ap.start_partition, ap.start_partition + ap.partitions,
                                 static_cast<uint64_t>(span.lo), static_cast<uint64_t>(span.hi));
  if (after != before) {
    ctx_.sink->counter(sbuf ? ctx_.sbuf_track : ctx_.psum_track, t, static_cast<double>(after));
  }
}

void ComputeEngine::run_instruction(const Instruction& in, size_t index) {
  const bool timing = ctx_.timing();
  const sim::SimTime now = thread_now();
  sim::SimTime issue = sim::max(now, inputs_ready(in));
  bool new_stationary = false;
  if (in.op == Opcode::kMatmul) {
    new_stationary = !holds_stationary_ || !(stationary_ == in.src0);
  }
  const ComputeCost cost = cost_->cost(in, {new_stationary, new_stationary && !loaded_any_});
  if (new_stationary) loaded_any_ = true;
  const sim::SimTime occupancy = timing ? clock_.to_time(cost.cycles) : sim::SimTime{};
  const sim::SimTime latency = timing ? clock_.to_time(cost.latency_cycles) : sim::SimTime{};

  sim::SimTime start;
  if (in.op == Opcode::kMatmul && new_stationary) {
    // The LoadStationary may start once the previous MultiplyMoving has taken the current
    // stationary (double buffer) and the stationary data is visible.
    const sim::SimTime ls_time =
        timing ? clock_.to_time(cost.load_stationary_cycles) : sim::SimTime{};
    const sim::SimTime ls_start = sim::max(sim::max(issue, ls_free_), prev_mm_start_);
    const sim::SimTime ls_end = ls_start + ls_time;
    ls_free_ = ls_end;
    if (ctx_.tracing() && ls_time.ps > 0) {
      sim::TraceArgs args{{"cycles", cost.load_stationary_cycles}, {"index", index}};
      args.add_deferred<AccessPattern, &AccessPattern::append_text>("stationary", in.src0);
      trace_slice(ls_track_, unit_row_, "load_stationary", ls_start, ls_end, std::move(args));
    }
    start = sim::max(sim::max(issue, engine_free_), ls_end);
    stationary_ = in.src0;
    holds_stationary_ = true;
  } else {
    start = sim::max(issue, engine_free_);
  }
  if (in.op == Opcode::kMatmul) prev_mm_start_ = start;
  if (in.op == Opcode::kTranspose) holds_stationary_ = false;  // transpose loads the PE array

  // The thread moves to the issue time; the data takes effect now (consumers synchronise on
  // semaphores signalled at `ready`).
  wait_until(start);
  if (ctx_.functional()) execute(in, ctx_.mem);
  const sim::SimTime end = start + occupancy;
  const sim::SimTime ready = end + latency;
  engine_free_ = end;
  last_ready_ = ready;
  record_write(in.dst, ready);
  if (in.has_acc_dst) record_write(in.acc_dst, ready);

  instructions_->add(1);
  busy_ps_->add(occupancy.ps);
  if (timing) busy_cycles_->add(static_cast<uint64_t>(std::llround(cost.cycles)));
  flops_->add(static_cast<uint64_t>(cost.flops));
  if (ctx_.tracing()) {
    AluPair alus{};
    sim::TraceArgs args = describe(in, alus);
    args.add({"cycles", cost.cycles});
    args.add({"index", index});
    if (cost.flops > 0) args.add({"flops", cost.flops});
    trace_slice(track_, display_name_, opcode_name(in.op), start, end, std::move(args));
    // Sampled at the issue time (now): engines reach it in time order, so the shared counter
    // track stays monotonic; an end time would let a short instruction on another engine that
    // issues later land before it.
    update_occupancy(in.dst, start);
    if (in.has_acc_dst) update_occupancy(in.acc_dst, start);
  }
}

sim::SimTime ComputeEngine::drain() {
  wait_until(engine_free_);
  holds_stationary_ = false;  // a new program's stationary is not the old one's data
  loaded_any_ = false;
  return sim::max(sim::Simulation::now(), last_ready_);
}

}  // namespace neuronsim::device_model
