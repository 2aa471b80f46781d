#include "session.h"

#include "neuronsim/device_model/errors.h"

namespace ncsim {

using namespace neuronsim;

Session::Session(const DeviceArgs& args, uint32_t cores, const std::string& trace_path) {
  device_model::Config config = device_model::Config::load(args.preset);
  config.apply_overrides(args.overrides);
  device_model::DeviceOptions opts;
  opts.cores = cores;
  opts.mode = *device_model::parse_exec_mode(args.mode);
  device_ = std::make_unique<device_model::Device>(config, opts);
  std::vector<sim::TraceSink*> sinks{&memory_};
  if (!trace_path.empty()) {
    file_ = std::make_unique<traces::ChromeJsonSink>(trace_path);
    sinks.push_back(file_.get());
  }
  tee_ = std::make_unique<traces::TeeTraceSink>(sinks);
  device_->set_trace_sink(tee_.get());
}

traces::Summary Session::finish() {
  device_->set_trace_sink(nullptr);
  if (file_) file_->finish();
  return traces::summarize(memory_.trace());
}

}  // namespace ncsim
