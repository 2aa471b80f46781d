#include "neuronsim/runtime/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "neuronsim/device_model/engines.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/runtime/run_log.h"

namespace neuronsim::runtime {

using device_model::ConfigError;

namespace {
// Never destroyed: tensors may be freed during interpreter shutdown, after static destructors.
Runtime*& slot() {
  static Runtime* r = nullptr;
  return r;
}
RuntimeConfig& pending_config() {
  static RuntimeConfig c = RuntimeConfig::from_environment();
  return c;
}
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
uint32_t parse_uint(const std::string& s, const std::string& variable) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6) {
    throw ConfigError(fmt::format("{}: '{}' is not a non-negative integer", variable, s));
  }
  return static_cast<uint32_t>(std::stoul(s));
}
}  // namespace

std::vector<uint32_t> parse_core_list(const std::string& text, const std::string& variable) {
  std::vector<uint32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      out.push_back(parse_uint(part, variable));
    } else {
      const uint32_t lo = parse_uint(part.substr(0, dash), variable);
      const uint32_t hi = parse_uint(part.substr(dash + 1), variable);
      if (hi < lo) throw ConfigError(fmt::format("{}: range '{}' is empty", variable, part));
      for (uint32_t c = lo; c <= hi; ++c) out.push_back(c);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw ConfigError(fmt::format("{}: '{}' lists a core twice", variable, text));
  }
  return out;
}

RuntimeConfig RuntimeConfig::from_environment() {
  RuntimeConfig c;
  if (!env("NEURON_SIM_PRESET").empty()) c.preset = env("NEURON_SIM_PRESET");
  const std::string sets = env("NEURON_SIM_SET");
  size_t start = 0;
  while (start < sets.size()) {
    const size_t comma = sets.find(',', start);
    std::string item =
        sets.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) c.overrides.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const std::string visible = env("NEURON_RT_VISIBLE_CORES");
  const std::string num = env("NEURON_RT_NUM_CORES");
  if (!visible.empty()) {
    c.visible_cores = parse_core_list(visible, "NEURON_RT_VISIBLE_CORES");
  } else if (!num.empty()) {
    const uint32_t n = parse_uint(num, "NEURON_RT_NUM_CORES");
    if (n == 0) throw ConfigError("NEURON_RT_NUM_CORES: must be at least 1");
    for (uint32_t i = 0; i < n; ++i) c.visible_cores.push_back(i);
  }
  const std::string lnc = env("NEURON_LOGICAL_NC_CONFIG");
  if (!lnc.empty()) {
    if (lnc != "1" && lnc != "2") {
      throw ConfigError(
          fmt::format("NEURON_LOGICAL_NC_CONFIG: '{}' is not 1 or 2 (physical NeuronCores per "
                      "logical NeuronCore)",
                      lnc));
    }
    c.logical_nc = parse_uint(lnc, "NEURON_LOGICAL_NC_CONFIG");
  }
  c.launch_blocking = env("NEURON_LAUNCH_BLOCKING") == "1";
  const std::string mode = env("NEURON_SIM_MODE");
  if (mode == "isa")
    c.isa_mode = true;
  else if (!mode.empty() && mode != "fast") {
    throw ConfigError(fmt::format("NEURON_SIM_MODE: '{}' is not 'fast' or 'isa'", mode));
  }
  return c;
}

Runtime& Runtime::instance() {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (!slot()) slot() = new Runtime(pending_config());
  return *slot();
}

bool Runtime::initialized() {
  return slot() != nullptr;
}

void Runtime::configure(const RuntimeConfig& config) {
  if (initialized()) {
    throw device_model::Error(
        "the neuronsim runtime is already initialised; configure it before the "
        "first use of a neuron device");
  }
  pending_config() = config;
}

const RuntimeConfig& Runtime::pending() {
  return initialized() ? slot()->config_ : pending_config();
}

namespace {

// The preset with the configuration's logical core size and overrides applied.
device_model::Config load_config(const RuntimeConfig& config) {
  device_model::Config cfg = device_model::Config::load(config.preset);
  if (config.logical_nc) {
    const device_model::ChipParams chip = device_model::parse_chip_params(cfg);
    if (*config.logical_nc > 1 && chip.logical_core_size == 1) {
      throw ConfigError(fmt::format(
          "NEURON_LOGICAL_NC_CONFIG={}: the {} preset ({}) has no logical NeuronCores of "
          "several physical cores (LNC=2 is trn2's)",
          *config.logical_nc, chip.preset_name, chip.instance_name));
    }
    cfg.apply_overrides({fmt::format("chip.logical_core_size={}", *config.logical_nc)});
  }
  cfg.apply_overrides(config.overrides);
  return cfg;
}

}  // namespace

uint32_t Runtime::visible_device_count(const RuntimeConfig& config) {
  device_model::Config cfg = load_config(config);
  const device_model::ChipParams chip = device_model::parse_chip_params(cfg);
  const uint32_t logical_total = chip.chips * chip.cores_per_chip / chip.logical_core_size;
  if (config.visible_cores.empty()) return logical_total;
  for (uint32_t v : config.visible_cores) {
    if (v >= logical_total) {
      throw ConfigError(fmt::format(
          "NeuronCore {} is not visible: the {} preset ({}) has {} logical NeuronCores (0-{})", v,
          chip.preset_name, chip.instance_name, logical_total, logical_total - 1));
    }
  }
  return static_cast<uint32_t>(config.visible_cores.size());
}

Runtime::Runtime(const RuntimeConfig& config) : config_(config) {
  device_model::Config cfg = load_config(config);
  const device_model::ChipParams chip = device_model::parse_chip_params(cfg);
  const uint32_t lnc = chip.logical_core_size;
  const uint32_t logical_total = chip.chips * chip.cores_per_chip / lnc;
  std::vector<uint32_t> visible = config.visible_cores;
  if (visible.empty()) {
    for (uint32_t i = 0; i < logical_total; ++i) visible.push_back(i);
  }
  for (uint32_t v : visible) {
    if (v >= logical_total) {
      throw ConfigError(fmt::format(
          "NeuronCore {} is not visible: the {} preset ({}) has {} logical NeuronCores (0-{})", v,
          chip.preset_name, chip.instance_name, logical_total, logical_total - 1));
    }
  }
  uint32_t max_phys = 0;
  for (uint32_t v : visible) {
    physical_.push_back(v * lnc);
    max_phys = std::max(max_phys, v * lnc + lnc - 1);
  }
  device_model::DeviceOptions opts;
  opts.cores = max_phys + 1;
  opts.mode = device_model::ExecMode::kTiming;
  device_ = std::make_unique<device_model::Device>(cfg, opts);
  // Each logical core gets an equal share of its HBM stack.
  const uint32_t per_stack = std::max<uint32_t>(1, chip.cores_per_stack() / lnc);
  const uint64_t share = chip.hbm.capacity_bytes / per_stack;
  for (uint32_t i = 0; i < physical_.size(); ++i) {
    const uint32_t logical = visible[i];
    const uint64_t base = device_->hbm_base_of_core(physical_[i]) + (logical % per_stack) * share;
    segments_.push_back(std::make_unique<HbmAllocator>(base, share));
    allocators_.push_back(std::make_unique<CachingAllocator>(*segments_.back(), device_name(i)));
  }
  streams_.resize(physical_.size(), std::vector<StreamState>(1));
  device_->set_hbm_range_check([this](uint64_t a, uint64_t n) { return valid_range(a, n); });
  collectives_.set_account(&account_);
}

void Runtime::check_dev(uint32_t dev) const {
  if (dev >= physical_.size()) {
    throw device_model::Error(
        fmt::format("invalid neuron device {}: {} devices are visible", dev, physical_.size()));
  }
}

uint32_t Runtime::physical_core(uint32_t dev) const {
  check_dev(dev);
  return physical_[dev];
}

std::string Runtime::device_name(uint32_t dev) const {
  return fmt::format("NeuronCore {} ({} {})", dev, device_->params().instance_name,
                     device_->params().preset_name);
}

void* Runtime::malloc(uint32_t dev, uint64_t bytes) {
  check_dev(dev);
  const uint64_t addr = allocators_[dev]->allocate(bytes);
  return device_->hbm_data() + addr;
}

void Runtime::free(void* ptr) {
  const int dev = device_of(ptr);
  if (dev >= 0) allocators_[dev]->free(hbm_address(ptr));
}

CachingAllocator& Runtime::allocator(uint32_t dev) {
  check_dev(dev);
  return *allocators_[dev];
}

HbmAllocator& Runtime::segments(uint32_t dev) {
  check_dev(dev);
  return *segments_[dev];
}

uint64_t Runtime::hbm_address(const void* ptr) const {
  return static_cast<uint64_t>(static_cast<const uint8_t*>(ptr) - device_->hbm_data());
}

int Runtime::device_of(const void* ptr) const {
  const uint8_t* p = static_cast<const uint8_t*>(ptr);
  if (p < device_->hbm_data() || p >= device_->hbm_data() + device_->hbm_capacity()) return -1;
  const uint64_t a = hbm_address(ptr);
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (a >= segments_[i]->base() && a < segments_[i]->base() + segments_[i]->capacity()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool Runtime::valid_range(uint64_t a, uint64_t n) const {
  for (const auto& s : segments_) {
    if (s->contains(a, n)) return true;
  }
  return false;
}

Runtime::StreamState& Runtime::stream_state(uint32_t dev, int64_t stream) {
  check_dev(dev);
  auto& v = streams_[dev];
  if (stream < 0 || static_cast<size_t>(stream) >= v.size()) {
    throw device_model::Error(fmt::format("unknown stream {} on neuron device {}", stream, dev));
  }
  return v[static_cast<size_t>(stream)];
}

int64_t Runtime::new_stream(uint32_t dev) {
  check_dev(dev);
  if (log_) log_->add({RunLog::Kind::kNewStream, dev});
  streams_[dev].push_back({});
  return static_cast<int64_t>(streams_[dev].size() - 1);
}

sim::SimTime Runtime::start_time(uint32_t dev, int64_t stream) {
  const StreamState& s = stream_state(dev, stream);
  return sim::max(sim::max(host_time_, device_->now()), s.wait);
}

device_model::RunResult Runtime::launch(uint32_t dev, int64_t stream,
                                        const device_model::Program& program, bool functional,
                                        bool validated) {
  const sim::SimTime start = start_time(dev, stream);
  if (start > device_->now()) device_->advance(start - device_->now());
  device_->set_mode(functional ? device_model::ExecMode::kFull : device_model::ExecMode::kTiming);
  device_model::RunResult r = device_->run(physical_[dev], program, validated);
  ++launches_;
  if (log_) log_->launch(dev, stream, program);
  // Nothing recorded from now on begins before the host clock (kernels, copies and host work
  // start at or after it): what lies before it can be settled.
  if (account_.pending() > 1024) account_.settle(host_time_);
  for (const auto& c : r.cores) account_.add(traces::TimePart::kKernels, c.start, c.end);
  stream_state(dev, stream).ready = r.end;
  if (config_.launch_blocking) host_time_ = sim::max(host_time_, r.end);
  return r;
}

device_model::Device::HostCopy Runtime::copy_host(uint32_t dev, int64_t stream, uint64_t bytes,
                                                  bool to_device, uint64_t hbm_address,
                                                  bool non_blocking) {
  const sim::SimTime start = start_time(dev, stream);
  if (start > device_->now()) device_->advance(start - device_->now());
  const auto r = device_->host_copy(physical_[dev], bytes, to_device, hbm_address);
  if (log_) {
    log_->add({RunLog::Kind::kCopy, dev, stream, hbm_address, bytes, to_device, non_blocking});
  }
  account_.add(traces::TimePart::kHostCopies, r.start, r.end);
  stream_state(dev, stream).ready = r.end;
  if (!non_blocking || config_.launch_blocking) host_time_ = sim::max(host_time_, r.end);
  return r;
}

void Runtime::host_advance(sim::SimTime delta) {
  if (log_) log_->add({RunLog::Kind::kHostAdvance, 0, 0, 0, delta.ps});
  host_time_ = host_time_ + delta;
}

sim::SimTime Runtime::charge(traces::TimePart part, double ns) {
  if (log_) {
    log_->add({part == traces::TimePart::kLaunch ? RunLog::Kind::kChargeLaunch
                                                 : RunLog::Kind::kChargeFallback});
  }
  const sim::SimTime begin = host_time_;
  host_time_ = host_time_ + sim::SimTime::from_ns(ns);
  account_.add(part, begin, host_time_);
  return begin;
}

sim::SimTime Runtime::charge_launch_overhead() {
  return charge(traces::TimePart::kLaunch, device_->params().host.kernel_launch_overhead_ns);
}

sim::SimTime Runtime::charge_cpu_fallback() {
  return charge(traces::TimePart::kCpuFallback, device_->params().host.cpu_fallback_overhead_ns);
}

traces::TimeAccount Runtime::time_account() const {
  return account_.account(
      sim::max(sim::max(host_time_, device_->now()), collectives_.latest_end()));
}

std::vector<std::pair<std::string, sim::SimTime>> Runtime::engine_busy() const {
  std::vector<std::pair<std::string, sim::SimTime>> out;
  sim::StatsRegistry& stats = device_->stats();
  for (uint32_t c = 0; c < device_->num_cores(); ++c) {
    std::vector<std::pair<std::string, sim::SimTime>> core;
    bool ran = false;
    for (const device_model::EngineInfo& e : device_model::kEngines) {
      const std::string key = fmt::format("nc{}.{}.busy_ps", c, e.stream);
      const auto ps = static_cast<uint64_t>(stats.value(key));
      const std::string row =
          e.compute ? std::string(e.row) : std::string(device_model::kAllDmaRow);
      core.push_back({fmt::format("nc{} {}", c, row), {ps}});
      ran = ran || ps > 0;
    }
    if (ran) out.insert(out.end(), core.begin(), core.end());
  }
  return out;
}

nlohmann::json Runtime::time_report() const {
  const traces::TimeAccount a = time_account();
  // [label, ns] pairs in the engine table's order, engines that did something only (as a
  // trace lists the engines with instructions).
  nlohmann::json engines = nlohmann::json::array();
  const auto busy = engine_busy();
  for (const auto& [label, t] : busy) {
    if (t.ps > 0) engines.push_back({label, static_cast<double>(t.ps) / 1000.0});
  }
  return {{"time_account", a.to_json()},
          {"engine_busy_ns", std::move(engines)},
          {"limit", traces::to_json(traces::limit_of(a, busy))}};
}

void Runtime::synchronize() {
  if (log_) log_->add({RunLog::Kind::kSynchronize});
  // Collectives in flight count as device work (as NCCL kernels do for cudaDeviceSynchronize).
  host_time_ = sim::max(host_time_, sim::max(device_->now(), collectives_.latest_end()));
}

const device_model::interconnect::InterconnectParams& Runtime::interconnect() {
  if (!interconnect_)
    interconnect_ = device_model::interconnect::parse_interconnect_params(device_->config());
  return *interconnect_;
}

sim::SimTime Runtime::arrival(uint32_t dev, int64_t stream) {
  if (log_) log_->unreplayable("it ran collectives (its clock meets the other ranks')");
  return stream_done(dev, stream);
}

sim::SimTime Runtime::stream_done(uint32_t dev, int64_t stream) {
  const StreamState& s = stream_state(dev, stream);
  return sim::max(sim::max(host_time_, s.ready), s.wait);
}

void Runtime::record(Event& e, uint32_t dev, int64_t stream) {
  if (log_) log_->add({RunLog::Kind::kRecord, dev, stream, log_->event_id(e)});
  // The event completes when the stream's work and the events it waits for complete (never
  // before the host reached the record call): what arrival() gives a collective.
  e.time = stream_done(dev, stream);
  e.recorded = true;
}

void Runtime::wait_event(const Event& e, uint32_t dev, int64_t stream) {
  if (log_) log_->add({RunLog::Kind::kWaitEvent, dev, stream, log_->event_id(e), 0, e.recorded});
  if (!e.recorded) return;
  StreamState& s = stream_state(dev, stream);
  s.wait = sim::max(s.wait, e.time);
}

void Runtime::synchronize_event(const Event& e) {
  if (log_) log_->add({RunLog::Kind::kSynchronizeEvent, 0, 0, log_->event_id(e), 0, e.recorded});
  if (e.recorded) host_time_ = sim::max(host_time_, e.time);
}

bool Runtime::query_stream(uint32_t dev, int64_t stream) const {
  const auto& v = streams_.at(dev);
  return host_time_ >= v.at(static_cast<size_t>(stream)).ready;
}

void Runtime::synchronize_stream(uint32_t dev, int64_t stream) {
  if (log_) log_->add({RunLog::Kind::kSynchronizeStream, dev, stream});
  host_time_ = sim::max(host_time_, stream_state(dev, stream).ready);
}

}  // namespace neuronsim::runtime
