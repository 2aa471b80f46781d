#pragma once
// The PrivateUse1 hooks (at::PrivateUse1HooksInterface): pinned host memory, generators,
// storage resizing.
#include <c10/core/Storage.h>

namespace neuronsim::backend {

/// Registers the PrivateUse1 hooks (once).
void register_hooks();
/// True for storage from the pinned host allocator.
bool is_pinned(const c10::Storage& storage);

}  // namespace neuronsim::backend
