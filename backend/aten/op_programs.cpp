#include "aten/op_programs.h"
#include "host_stages.h"

#include <ATen/ATen.h>

#include <optional>

#include "accelerator/context.h"
#include "aten/device_tensor.h"
#include "aten/isa_outputs.h"
#include "aten/op_capture.h"
#include "aten/program_key.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend {
namespace {

// A data-dependent output shape: the host waits for the device and reads the element count the
// program wrote (4 bytes over the host link) before it can size the output, as on the device.
void read_count(const c10::Device& device, const at::Tensor& count) {
  with_runtime([&](runtime::Runtime& r) {
    const sim::SimTime h0 = r.host_time();
    r.synchronize();
    r.copy_host(static_cast<uint32_t>(device.index()), current_stream(device.index()).id(),
                count.element_size(), false, r.hbm_address(count.data_ptr()), false);
    if (runtime::TraceSession* t = runtime::TraceSession::active())
      t->host("read output size (waits for the device)", "copy", h0, r.host_time());
    return 0;
  });
}

}  // namespace

void run_programs(const NativeOp& native, OpInvocation& inv, const ValuesOutcome& values,
                  const OpCapture& capture) {
  if (native.shape_sync) inv.count = at::empty({1}, at::TensorOptions(inv.device).dtype(at::kInt));
  // Under the runtime lock throughout: a cached program stays put until it has run.
  with_runtime([&](runtime::Runtime& r) {
    inv.core_params = &r.device().params().core;
    inv.hbm_address = hbm_addresses(r);
    inv.grid = capture.grid(r);
    std::optional<ProgramKey> key;
    const std::vector<device_model::Program>* cached = nullptr;
    std::vector<device_model::Program> built;
    {
      sim::HostStageScope stage(stages::kBuild);
      if (native.cacheable && !native.shape_sync && capture.eager() &&
          r.program_cache().enabled()) {
        key = program_key(inv, values.functional);
        if (key) cached = r.program_cache().find(key->key, key->regions);
      }
      if (!cached) built = native.build(inv);
    }
    if (values.functional) {
      for (const auto& [dev_t, saved] : values.snapshots) {
        if (dev_t.sizes().equals(saved.sizes())) cpu_view(dev_t).copy_(saved);  // resized: no
      }
      for (const at::Tensor& t : values.poisoned) poison(t);
    }
    capture.take(inv.device, cached ? *cached : built, values.functional, cached != nullptr);
    if (key && !cached) {
      sim::HostStageScope stage(stages::kBuild);
      r.program_cache().insert(key->key, std::move(built), std::move(key->regions));
    }
    return 0;
  });
  if (native.shape_sync) read_count(inv.device, inv.count);
}

void launch_programs(const c10::Device& device, const std::vector<device_model::Program>& programs,
                     bool functional, bool validated) {
  op_capture().take(device, programs, functional, validated);
}

}  // namespace neuronsim::backend
