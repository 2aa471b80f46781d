#include "neuronsim/device_model/memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "neuronsim/device_model/errors.h"

namespace neuronsim::device_model {

HbmStorage::HbmStorage(uint64_t stack_capacity, uint32_t stacks)
    : stack_capacity_(stack_capacity), stacks_(stacks) {
  // MAP_NORESERVE: only pages that are touched take host memory, so a 96 GiB device costs nothing
  // until tensors are written.
  void* p = mmap(nullptr, capacity(), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw Error("cannot reserve " + std::to_string(capacity()) +
                " bytes of host address space for simulated HBM: " + std::strerror(errno));
  }
  base_ = static_cast<uint8_t*>(p);
}

HbmStorage::~HbmStorage() {
  if (base_) munmap(base_, capacity());
}

}  // namespace neuronsim::device_model
