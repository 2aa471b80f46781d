#pragma once
// The backend's stages of the per-op host path (sim/host_profile.h, NEURONSIM_HOST_PROFILE=1).
#include "neuronsim/sim/host_profile.h"

namespace neuronsim::backend::stages {

// The native kernel's own work: argument checks, unpacking, CPU views.
inline const sim::HostStage kDispatch{"dispatch"};
// The CPU kernel that computes the values (fast mode).
inline const sim::HostStage kHostValues{"host_values"};
// Building the op's programs (or finding them in the program cache).
inline const sim::HostStage kBuild{"build"};
// The runtime's launch and the SystemC run of the program.
inline const sim::HostStage kLaunch{"launch"};
// Recording the op, launch and kernel into an active trace.
inline const sim::HostStage kTrace{"trace"};
// Native / fallback op counts.
inline const sim::HostStage kOpTracking{"op_tracking"};
// The CPU fallback (copies through the simulated DMA and the CPU kernel).
inline const sim::HostStage kFallback{"fallback"};
// Device memory: the caching allocator's allocate and free.
inline const sim::HostStage kAlloc{"alloc"};
// The op-tracking RecordFunction observer's enter and exit callbacks.
inline const sim::HostStage kObserver{"observer"};

}  // namespace neuronsim::backend::stages
