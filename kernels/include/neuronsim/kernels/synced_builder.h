#pragma once
// A ProgramBuilder that derives synchronisation from data: each instruction names the on-chip
// buffers it reads and writes, and the builder inserts the semaphore waits a correct program
// needs (read after write, write after read, write after write) across engines. Marks are
// placed lazily, only where another engine waits. Fused-region emitters use it so buffer reuse
// and double buffering need no hand-written tokens.
#include <cstdint>
#include <map>
#include <vector>

#include "neuronsim/kernels/program_builder.h"

namespace neuronsim::kernels {

class SyncedBuilder {
 public:
  using Buffer = int;

  explicit SyncedBuilder(ProgramBuilder& b) : b_(b) {}

  /// A new hazard-tracked resource (an SBUF tile or a PSUM bank region).
  Buffer buffer();
  /// Emits `in` on `s` after the writes it reads and the accesses it overwrites.
  void emit(device_model::StreamId s, const device_model::Instruction& in,
            const std::vector<Buffer>& reads, const std::vector<Buffer>& writes);
  /// Marks `s` now: a later wait for what it has emitted so far need not wait for what it
  /// emits next (marks are otherwise placed when a wait needs one, covering all emitted work,
  /// which is too late when a stream's later work was emitted in between).
  void publish(device_model::StreamId s);
  /// Makes `s` wait until every access to `buf` so far has completed.
  void wait_idle(device_model::StreamId s, Buffer buf);

  ProgramBuilder& builder() { return b_; }

 private:
  struct Access {
    int stream = -1;  // index into streams_
    uint64_t seq = 0;
  };
  struct State {
    Access write;
    std::map<int, uint64_t> reads;  // stream -> last read seq since the write
  };
  int stream_index(device_model::StreamId s);
  void depend(int stream, const Access& on);

  ProgramBuilder& b_;
  std::vector<State> buffers_;
  std::vector<device_model::StreamId> streams_;
  std::vector<uint64_t> seq_;  // instructions emitted per stream
  // Marks per stream: (seq covered, token).
  std::vector<std::vector<std::pair<uint64_t, ProgramBuilder::Token>>> marks_;
};

}  // namespace neuronsim::kernels
