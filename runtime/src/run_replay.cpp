#include "neuronsim/runtime/run_replay.h"

#include <map>
#include <stdexcept>
#include <vector>

namespace neuronsim::runtime {

void replay(const RunLog& log, Runtime& rt) {
  if (!log.replayable()) throw std::runtime_error("this run cannot be re-timed: " + log.why_not());
  std::map<uint64_t, Event> events;
  // Each program is validated against this preset at its first launch (another preset may lack
  // what it uses, e.g. DMA queues); its HBM ranges were checked when it ran, against memory this
  // runtime never allocated.
  std::vector<bool> validated(log.programs().size(), false);
  rt.device().set_hbm_range_check([](uint64_t, uint64_t) { return true; });
  struct Restore {
    Runtime& rt;
    ~Restore() {
      rt.device().set_hbm_range_check(
          [r = &rt](uint64_t a, uint64_t n) { return r->valid_range(a, n); });
    }
  } restore{rt};
  using K = RunLog::Kind;
  for (const RunLog::Entry& e : log.entries()) {
    switch (e.kind) {
      case K::kLaunch:
        rt.launch(e.dev, e.stream, log.programs()[e.a], false, validated[e.a]);
        validated[e.a] = true;
        break;
      case K::kChargeLaunch:
        rt.charge_launch_overhead();
        break;
      case K::kChargeFallback:
        rt.charge_cpu_fallback();
        break;
      case K::kHostAdvance:
        rt.host_advance({e.b});
        break;
      case K::kCopy:
        rt.copy_host(e.dev, e.stream, e.b, e.flag, e.a, e.flag2);
        break;
      case K::kSynchronize:
        rt.synchronize();
        break;
      case K::kSynchronizeStream:
        rt.synchronize_stream(e.dev, e.stream);
        break;
      case K::kSynchronizeEvent:
        if (e.flag) rt.synchronize_event(events[e.a]);
        break;
      case K::kRecord:
        rt.record(events[e.a], e.dev, e.stream);
        break;
      case K::kWaitEvent:
        if (e.flag) rt.wait_event(events[e.a], e.dev, e.stream);
        break;
      case K::kNewStream:
        rt.new_stream(e.dev);
        break;
    }
  }
  rt.synchronize();
}

}  // namespace neuronsim::runtime
