#include "neuronsim/kernels/synced_builder.h"

namespace neuronsim::kernels {

SyncedBuilder::Buffer SyncedBuilder::buffer() {
  buffers_.emplace_back();
  return static_cast<Buffer>(buffers_.size()) - 1;
}

int SyncedBuilder::stream_index(device_model::StreamId s) {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i] == s) return static_cast<int>(i);
  }
  streams_.push_back(s);
  seq_.push_back(0);
  marks_.emplace_back();
  return static_cast<int>(streams_.size()) - 1;
}

void SyncedBuilder::depend(int stream, const Access& on) {
  // An engine runs its own stream in order (and waits for its own results), so only other
  // streams need a semaphore.
  if (on.stream < 0 || on.stream == stream || on.seq == 0) return;
  auto& marks = marks_[static_cast<size_t>(on.stream)];
  ProgramBuilder::Token token;
  bool found = false;
  for (const auto& [covered, t] : marks) {
    if (covered >= on.seq) {
      token = t;
      found = true;
      break;
    }
  }
  if (!found) {
    // Mark the other stream now: it covers everything it has emitted so far.
    token = b_.mark(streams_[static_cast<size_t>(on.stream)]);
    marks.emplace_back(seq_[static_cast<size_t>(on.stream)], token);
  }
  b_.wait(streams_[static_cast<size_t>(stream)], token);
}

void SyncedBuilder::emit(device_model::StreamId s, const device_model::Instruction& in,
                         const std::vector<Buffer>& reads, const std::vector<Buffer>& writes) {
  const int si = stream_index(s);
  for (Buffer r : reads) depend(si, buffers_.at(static_cast<size_t>(r)).write);
  for (Buffer w : writes) {
    State& st = buffers_.at(static_cast<size_t>(w));
    depend(si, st.write);
    for (const auto& [stream, seq] : st.reads) depend(si, Access{stream, seq});
  }
  b_.emit(s, in);
  const uint64_t seq = ++seq_[static_cast<size_t>(si)];
  for (Buffer r : reads) {
    uint64_t& last = buffers_.at(static_cast<size_t>(r)).reads[si];
    last = std::max(last, seq);
  }
  for (Buffer w : writes) {
    State& st = buffers_.at(static_cast<size_t>(w));
    st.write = Access{si, seq};
    st.reads.clear();
  }
}

void SyncedBuilder::publish(device_model::StreamId s) {
  const int si = stream_index(s);
  auto& marks = marks_[static_cast<size_t>(si)];
  const uint64_t seq = seq_[static_cast<size_t>(si)];
  if (seq == 0 || (!marks.empty() && marks.back().first >= seq)) return;
  marks.emplace_back(seq, b_.mark(s));
}

void SyncedBuilder::wait_idle(device_model::StreamId s, Buffer buf) {
  const int si = stream_index(s);
  State& st = buffers_.at(static_cast<size_t>(buf));
  depend(si, st.write);
  for (const auto& [stream, seq] : st.reads) depend(si, Access{stream, seq});
}

}  // namespace neuronsim::kernels
