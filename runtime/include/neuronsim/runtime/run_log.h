#pragma once
// A run's calls into the runtime that move its clocks, kept so the run can be re-timed under
// another preset without running the program again (`neuronsim whatif --sensitivity`,
// `neuronsim replay`): the programs launched, the host's charges and waits, host copies,
// streams and events, in order. Replaying them on a runtime configured with another preset
// times the same programs on other hardware: every cost the runtime and device model charge is
// recomputed (clocks, bandwidths, latencies, launch and fallback overhead), while the programs
// stay those the kernel library built for the recorded preset (a parameter the library reads to
// build them, such as the DMA queue count, needs the program to run again). A run with
// collectives cannot be replayed alone (its clock meets the other ranks'). Torch-free.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/device_model/program.h"
#include "neuronsim/sim/units.h"

namespace neuronsim::runtime {

struct Event;

class RunLog {
 public:
  enum class Kind : uint8_t {
    kLaunch,             // program, dev, stream
    kChargeLaunch,       // host: kernel launch overhead
    kChargeFallback,     // host: CPU fallback overhead
    kHostAdvance,        // host: a given time (ps)
    kCopy,               // dev, stream, bytes, to_device, hbm address, non_blocking
    kSynchronize,        // host waits for the device
    kSynchronizeStream,  // dev, stream
    kSynchronizeEvent,   // event (recorded when waited for)
    kRecord,             // event, dev, stream
    kWaitEvent,          // event (recorded when waited on), dev, stream
    kNewStream,          // dev
  };
  struct Entry {
    Kind kind;
    uint32_t dev = 0;
    int64_t stream = 0;
    uint64_t a = 0, b = 0;  // program index, bytes / ps, event id, hbm address
    bool flag = false;      // to_device, event recorded
    bool flag2 = false;     // non_blocking
  };

  /// The configuration the run used (preset name or path, overrides, visible cores, launch
  /// blocking): a replay applies its own overrides on top.
  explicit RunLog(nlohmann::json config = nlohmann::json::object());

  void launch(uint32_t dev, int64_t stream, const device_model::Program& program);
  void add(Entry e) { entries_.push_back(e); }
  uint64_t event_id(const Event& e);
  /// Marks the run as not replayable on its own, with the reason (first one kept).
  void unreplayable(const std::string& why);

  bool replayable() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const std::vector<device_model::Program>& programs() const { return programs_; }
  const nlohmann::json& config() const { return config_; }
  size_t launches() const { return launches_; }

  /// The log as JSON ("neuronsim-runlog/1"); programs in the program JSON format (ISA.md).
  nlohmann::json to_json() const;
  /// Reads a log; throws std::runtime_error naming `origin` and the problem.
  static RunLog from_json(const nlohmann::json& j, const std::string& origin);

 private:
  nlohmann::json config_;
  std::vector<Entry> entries_;
  std::vector<device_model::Program> programs_;
  std::map<uint64_t, std::vector<size_t>> by_hash_;  // program content hash -> indices
  std::map<const Event*, uint64_t> events_;
  std::string why_not_;
  size_t launches_ = 0;
};

inline constexpr const char* kRunLogFormat = "neuronsim-runlog/1";

}  // namespace neuronsim::runtime
