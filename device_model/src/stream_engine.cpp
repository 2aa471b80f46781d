#include "stream_engine.h"

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"
#include "neuronsim/sim/simulation.h"

namespace neuronsim::device_model {
namespace {
constexpr size_t kPrefetchAhead = 2;
void prefetch_instruction(const Instruction& in) {
  const char* p = reinterpret_cast<const char*>(&in);
  for (size_t off = 0; off < sizeof(Instruction); off += 64) __builtin_prefetch(p + off);
}
}  // namespace

StreamEngine::StreamEngine(sc_core::sc_module_name name, CoreContext& ctx, StreamId id)
    : sc_module(name), ctx_(ctx), id_(id), name_(id.name()), display_name_(id.display_name()) {
  SC_THREAD(thread);
}

void StreamEngine::start(const Stream* stream) {
  stream_ = stream;
  busy_ = stream != nullptr && !stream->instructions.empty();
  pc_ = 0;
  if (busy_) start_ev_.notify(sc_core::SC_ZERO_TIME);
}

void StreamEngine::wait_until(sim::SimTime t) {
  if (defer_waits_) {
    local_ = sim::max(local_, t);
    return;
  }
  const sim::SimTime now = sim::Simulation::now();
  if (t > now) sc_core::wait(sc_core::sc_time::from_value((t - now).ps));
}

sim::SimTime StreamEngine::thread_now() const {
  const sim::SimTime now = sim::Simulation::now();
  return defer_waits_ ? sim::max(now, local_) : now;
}

void StreamEngine::catch_up() {
  if (!defer_waits_) return;
  const sim::SimTime now = sim::Simulation::now();
  if (local_ > now) sc_core::wait(sc_core::sc_time::from_value((local_ - now).ps));
}

std::string StreamEngine::blocked_reason() const {
  if (!busy_ || !stream_ || pc_ >= stream_->instructions.size()) return "";
  const Instruction& in = stream_->instructions[pc_];
  if (in.op == Opcode::kSemWait) {
    return fmt::format("{} at instruction {} waits for semaphore {} >= {} (value is {})",
                       id_.display_name(), pc_, in.sem, in.sem_value, ctx_.sems->value(in.sem));
  }
  return fmt::format("{} at instruction {} ({})", id_.display_name(), pc_, opcode_name(in.op));
}

void StreamEngine::trace_slice(sim::TrackId& track, const std::string& row, std::string_view name,
                               sim::SimTime b, sim::SimTime e, sim::TraceArgs args) {
  if (track == 0) {
    int sort = static_cast<int>(id_.engine) * 2 + (id_.engine == EngineKind::kDma ? id_.queue : 0);
    // Physical cores of one logical core: each one's rows together, pcore 0 first.
    sort += 1000 * static_cast<int>(ctx_.index % ctx_.logical_core_size);
    // Track ids start at 1 so 0 means "not created yet".
    track = ctx_.sink->add_track({ctx_.process_name(), ctx_.row_prefix() + row,
                                  sim::TrackKind::kSlices, 10 + sort}) +
            1;
  }
  args.add({"kernel", ctx_.program_name});
  // A traced kernel's instruction names the source line it came from (NKI kernels).
  if (stream_ && pc_ < stream_->sources.size() && stream_->sources[pc_] < ctx_.sources->size()) {
    args.add({"src", (*ctx_.sources)[stream_->sources[pc_]]});
  }
  ctx_.sink->slice(track - 1, name, name_, b, e, args);
}

void StreamEngine::thread() {
  if (!stall_ps_) {
    stall_ps_ =
        &ctx_.stats->counter(fmt::format("nc{}.{}.semaphore_wait_ps", ctx_.index, id_.name()), "ps",
                             "time spent blocked on semaphores");
  }
  for (;;) {
    sc_core::wait(start_ev_);
    try {
      last_ready_ = sim::Simulation::now();
      local_ = last_ready_;
      defer_waits_ = may_defer_waits_ && !ctx_.functional() && !ctx_.tracing();
      on_issue_point(last_ready_, true);
      const auto& ins = stream_->instructions;
      const auto& marks = stream_->section_marks;
      size_t next_mark = 0;
      int64_t section = -1;
      // A section ends on this stream when its last result is visible: at the next section's
      // first instruction that is last_ready_, at the end of the stream the drain time.
      auto close_section = [&](sim::SimTime t) {
        if (section >= 0 && static_cast<size_t>(section) < ctx_.section_end.size()) {
          ctx_.section_end[section] = sim::max(ctx_.section_end[section], t);
        }
      };
      for (pc_ = 0; pc_ < ins.size() && !ctx_.abort; ++pc_) {
        while (next_mark < marks.size() && marks[next_mark].first <= pc_) {
          close_section(last_ready_);
          section = marks[next_mark++].second;
        }
        // Instructions are large and read once per run: fetch the next ones ahead.
        if (pc_ + kPrefetchAhead < ins.size()) prefetch_instruction(ins[pc_ + kPrefetchAhead]);
        const Instruction& in = ins[pc_];
        if (in.op == Opcode::kSemWait) {
          catch_up();
          const sim::SimTime t0 = sim::Simulation::now();
          ctx_.sems->wait_at_least(in.sem, in.sem_value, ctx_.abort);
          stall_ps_->add((sim::Simulation::now() - t0).ps);
          on_issue_point(ctx_.sems->reached_at(in.sem, in.sem_value), false);
        } else if (in.op == Opcode::kSemSignal) {
          catch_up();
          // sem_pcore: another program instance's semaphore (validated < grid).
          SemaphoreBank* target = in.sem_pcore < 0 ? ctx_.sems : ctx_.grid_sems[in.sem_pcore];
          target->signal_at(in.sem, in.sem_value, last_ready_);
        } else {
          run_instruction(in, pc_);
          ++executed_;
        }
      }
      catch_up();
      defer_waits_ = false;
      // An aborted stream's issued instructions still complete; the next run starts after them.
      finish_ = drain();
      close_section(finish_);
    } catch (...) {
      defer_waits_ = false;
      if (!ctx_.error) ctx_.error = std::current_exception();
      ctx_.abort = true;
      ctx_.sems->wake_all();
    }
    busy_ = false;
  }
}

}  // namespace neuronsim::device_model
