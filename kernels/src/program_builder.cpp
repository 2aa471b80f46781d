#include "neuronsim/kernels/program_builder.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/instructions.h"

namespace neuronsim::kernels {

ProgramBuilder::ProgramBuilder(std::string name, const device_model::CoreParams& core)
    : core_(core) {
  program_.name = std::move(name);
}

uint16_t ProgramBuilder::sem_of(StreamId s) const {
  const uint32_t sem = s.engine == device_model::EngineKind::kDma
                           ? device_model::kComputeEngineCount + s.queue
                           : static_cast<uint32_t>(s.engine);
  if (sem >= core_.semaphores) {
    throw std::logic_error(fmt::format("stream {} needs semaphore {}; the core has {}", s.name(),
                                       sem, core_.semaphores));
  }
  return static_cast<uint16_t>(sem);
}

void ProgramBuilder::emit(StreamId s, const device_model::Instruction& in) {
  program_.stream(s).instructions.push_back(in);
}

ProgramBuilder::Token ProgramBuilder::mark(StreamId s) {
  const uint16_t sem = sem_of(s);
  emit(s, device_model::isa::sem_signal(sem, 1));
  return {sem, ++signals_[sem]};
}

void ProgramBuilder::wait(StreamId s, Token t) {
  if (t.value == 0 || sem_of(s) == t.sem) return;  // in-order within a stream
  int32_t& done = waited_[{s.name(), t.sem}];
  if (done >= t.value) return;
  done = t.value;
  emit(s, device_model::isa::sem_wait(t.sem, t.value));
}

uint64_t ProgramBuilder::alloc_sbuf(uint64_t bytes, uint64_t align) {
  const uint64_t off = (sbuf_next_ + align - 1) / align * align;
  if (off + bytes > core_.sbuf.partition_bytes) {
    throw std::length_error(
        fmt::format("kernel {} needs {} more SBUF bytes per partition; {} of "
                    "{} are in use",
                    program_.name, bytes, off, core_.sbuf.partition_bytes));
  }
  sbuf_next_ = off + bytes;
  return off;
}

uint64_t ProgramBuilder::alloc_psum_bank() {
  if (psum_next_ >= core_.psum.banks) {
    throw std::length_error(
        fmt::format("kernel {} needs more than {} PSUM banks", program_.name, core_.psum.banks));
  }
  return static_cast<uint64_t>(psum_next_++) * core_.psum.bank_bytes();
}

void ProgramBuilder::add_hbm_region(const std::string& name, uint64_t offset, uint64_t bytes) {
  program_.hbm_regions.push_back({name, offset, bytes});
}

device_model::Program ProgramBuilder::build() && {
  return std::move(program_);
}

}  // namespace neuronsim::kernels
