#pragma once
// Data larger than a header slot, posted together with the header. Every rank posts the receives
// of its peers' data and sends its own before it reads their headers, so a collective is one
// synchronisation of the ranks whatever its size (not the header exchange, then Gloo's
// collective). The data before its tail goes as messages of exactly one slot's data capacity, and
// the tail (1 byte to a slot) in the header message, whose receive takes a full slot. A receive
// is therefore never shorter than the message that meets it, even when the ranks disagree about
// sizes (Gloo's transport thread would terminate the process, "op.preamble.length <= op.nbytes"):
// disagreeing ranks match fewer messages than one of them posted, and settle() waits for the
// matched ones and drops the others. The messages use a tag of their own per collective, so a
// dropped one never meets a later collective's. Everything goes through the Gloo group's
// point-to-point API.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <vector>

namespace neuronsim::backend::distributed {

/// Where a peer's data lands on this rank and how many bytes this rank expects from it.
struct Landing {
  uint8_t* data = nullptr;
  int64_t size = 0;
};

/// The posted messages of one collective, by peer.
class PostedData {
 public:
  /// `chunk`: the bytes of every message; `tag`: the collective's own Gloo tag.
  PostedData(c10d::Backend& gloo, int ranks, int64_t chunk, int tag);
  /// Posts `count` receives from `peer` into consecutive chunks from `into`.
  void post_recvs(int peer, uint8_t* into, int64_t count);
  /// Posts `count` sends to `peer` of consecutive chunks from `from`.
  void post_sends(int peer, const uint8_t* from, int64_t count);
  /// Waits for every message (the process group's timeout applies to each); throws Gloo's error.
  void wait_all();
  /// After the ranks disagreed: waits for the first matched_recvs[peer] receives and
  /// matched_sends[peer] sends (those the peers posted counterparts for, so Gloo completes them)
  /// and drops the rest, which no message will meet. Errors are ignored: the caller raises its own.
  void settle(const std::vector<int64_t>& matched_recvs,
              const std::vector<int64_t>& matched_sends) noexcept;
  int64_t recvs(int peer) const { return static_cast<int64_t>(recvs_[peer].size()); }
  int64_t sends(int peer) const { return static_cast<int64_t>(sends_[peer].size()); }

 private:
  c10d::Backend& gloo_;
  int64_t chunk_;
  int tag_;
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> recvs_, sends_;
};

}  // namespace neuronsim::backend::distributed
