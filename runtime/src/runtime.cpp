#include "neuronsim/runtime/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "neuronsim/device/errors.h"

namespace neuronsim::runtime {

using device::ConfigError;

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
    throw device::Error(
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
device::Config load_config(const RuntimeConfig& config) {
  device::Config cfg = device::Config::load(config.preset);
  if (config.logical_nc) {
    const device::ChipParams chip = device::parse_chip_params(cfg);
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
  device::Config cfg = load_config(config);
  const device::ChipParams chip = device::parse_chip_params(cfg);
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
  device::Config cfg = load_config(config);
  const device::ChipParams chip = device::parse_chip_params(cfg);
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
  device::DeviceOptions opts;
  opts.cores = max_phys + 1;
  opts.mode = device::ExecMode::kTiming;
  device_ = std::make_unique<device::Device>(cfg, opts);
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
}

void Runtime::check_dev(uint32_t dev) const {
  if (dev >= physical_.size()) {
    throw device::Error(
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
    throw device::Error(fmt::format("unknown stream {} on neuron device {}", stream, dev));
  }
  return v[static_cast<size_t>(stream)];
}

int64_t Runtime::new_stream(uint32_t dev) {
  check_dev(dev);
  streams_[dev].push_back({});
  return static_cast<int64_t>(streams_[dev].size() - 1);
}

sim::SimTime Runtime::start_time(uint32_t dev, int64_t stream) {
  const StreamState& s = stream_state(dev, stream);
  return sim::max(sim::max(host_time_, device_->now()), s.wait);
}

device::RunResult Runtime::launch(uint32_t dev, int64_t stream, const device::Program& program,
                                  bool functional, bool validated) {
  const sim::SimTime start = start_time(dev, stream);
  if (start > device_->now()) device_->advance(start - device_->now());
  device_->set_mode(functional ? device::ExecMode::kFull : device::ExecMode::kTiming);
  device::RunResult r = device_->run(physical_[dev], program, validated);
  ++launches_;
  stream_state(dev, stream).ready = r.end;
  if (config_.launch_blocking) host_time_ = sim::max(host_time_, r.end);
  return r;
}

device::Device::HostCopy Runtime::copy_host(uint32_t dev, int64_t stream, uint64_t bytes,
                                            bool to_device, uint64_t hbm_address,
                                            bool non_blocking) {
  const sim::SimTime start = start_time(dev, stream);
  if (start > device_->now()) device_->advance(start - device_->now());
  const auto r = device_->host_copy(physical_[dev], bytes, to_device, hbm_address);
  stream_state(dev, stream).ready = r.end;
  if (!non_blocking || config_.launch_blocking) host_time_ = sim::max(host_time_, r.end);
  return r;
}

void Runtime::synchronize() {
  // Collectives in flight count as device work (as NCCL kernels do for cudaDeviceSynchronize).
  host_time_ = sim::max(host_time_, sim::max(device_->now(), collectives_.latest_end()));
}

const collectives::InterconnectParams& Runtime::interconnect() {
  if (!interconnect_) interconnect_ = collectives::parse_interconnect_params(device_->config());
  return *interconnect_;
}

sim::SimTime Runtime::arrival(uint32_t dev, int64_t stream) {
  const StreamState& s = stream_state(dev, stream);
  return sim::max(sim::max(host_time_, s.ready), s.wait);
}

void Runtime::record(Event& e, uint32_t dev, int64_t stream) {
  const StreamState& s = stream_state(dev, stream);
  // The event completes when the stream's work and the events it waits for complete (never
  // before the host reached the record call): what arrival() gives a collective.
  e.time = arrival(dev, stream);
  e.recorded = true;
}

void Runtime::wait_event(const Event& e, uint32_t dev, int64_t stream) {
  if (!e.recorded) return;
  StreamState& s = stream_state(dev, stream);
  s.wait = sim::max(s.wait, e.time);
}

void Runtime::synchronize_event(const Event& e) {
  if (e.recorded) host_time_ = sim::max(host_time_, e.time);
}

bool Runtime::query_stream(uint32_t dev, int64_t stream) const {
  const auto& v = streams_.at(dev);
  return host_time_ >= v.at(static_cast<size_t>(stream)).ready;
}

void Runtime::synchronize_stream(uint32_t dev, int64_t stream) {
  host_time_ = sim::max(host_time_, stream_state(dev, stream).ready);
}

}  // namespace neuronsim::runtime
