#pragma once

namespace neuronsim::backend {

/// Registers the PrivateUse1 hooks (once).
void register_hooks();
/// True for memory from the pinned host allocator.
bool is_pinned_host_pointer(const void* p);

}  // namespace neuronsim::backend
