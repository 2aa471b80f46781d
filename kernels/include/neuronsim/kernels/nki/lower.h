#pragma once
// NKI kernel -> device Program: expands the traced loops, allocates each tile instance in SBUF or
// PSUM (next fit, so consecutive iterations get different buffers and can overlap, as the NKI
// compiler's multi-buffered allocation lets them), turns the affine addresses into access
// patterns, picks engines and DMA queues, and inserts the semaphore waits the data dependences
// need. Errors name the kernel's source line and a stable rule id.
#include <stdexcept>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/nki/kernel_ir.h"

namespace neuronsim::kernels::nki {

/// A kernel the chip or the NKI compiler would reject. what() is one line:
/// "kernel.py:12: rule-id: message".
class KernelError : public std::runtime_error {
 public:
  KernelError(std::string rule, const std::string& message)
      : std::runtime_error(message), rule_(std::move(rule)) {}
  const std::string& rule() const { return rule_; }

 private:
  std::string rule_;
};

struct LowerStats {
  uint64_t instructions = 0;  // data instructions emitted
  uint64_t semaphore_waits = 0;
  uint64_t sbuf_peak_bytes = 0;  // per partition, allocated at once
  uint64_t psum_peak_bytes = 0;
  double expand_seconds = 0;    // host time expanding the loops into instructions
  double validate_seconds = 0;  // host time checking the program against the chip's rules
};

/// Lowers `kernel` for cores with `core`'s parameters. The program carries the kernel's source
/// table (Program::sources) and each instruction's line. Throws KernelError.
device_model::Program lower(const Kernel& kernel, const device_model::CoreParams& core,
                            LowerStats* stats = nullptr);

}  // namespace neuronsim::kernels::nki
