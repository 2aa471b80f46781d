#pragma once
// Data larger than a header slot, posted together with the header: every rank posts the receive
// of each peer's data (its part beyond what the header's slot carries, one message) before it
// sends its header, so the data of a collective of any size travels in the one synchronisation
// of the ranks that the header exchange is (not the header exchange, then Gloo's collective).
//
// Gloo's TCP transport sends a message once the receiver's receive-ready notice has arrived, and
// a message longer than the receive it meets terminates the process ("op.preamble.length <=
// op.nbytes"). So a rank sends data before it has read the peer's header only when both ranks
// know, without that header, that the receive matches: the size is one the two ranks agreed on
// in an earlier collective of the same kind (AgreedSizes, the same table on both ranks), and the
// message's tag names which of those sizes it is, so a receive and a message can only meet when
// their sizes are equal. Other data is sent after the agreement check, on a tag of its own. When
// the ranks disagree, every posted message is still completed (a receive nobody sends to gets
// zeros, a message nobody receives lands in a throwaway buffer): a message that meets a dropped
// receive, or a receive-ready notice that meets a dropped send, stalls Gloo's connection.
// Everything goes through the Gloo group's point-to-point API.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace neuronsim::backend::distributed {

/// Where a peer's data lands on this rank and how many bytes this rank expects from it.
struct Landing {
  uint8_t* data = nullptr;
  int64_t size = 0;
};

/// The posted messages of one collective, each on its own Gloo tag.
class PostedData {
 public:
  explicit PostedData(c10d::Backend& gloo) : gloo_(gloo) {}
  void post_recv(int peer, uint8_t* into, int64_t bytes, int tag);
  void post_send(int peer, const uint8_t* from, int64_t bytes, int tag);
  /// Waits for every message (each under the process group's timeout); throws Gloo's error.
  void wait_all();

 private:
  c10d::Backend& gloo_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

/// The sizes of posted data one direction of one pair of ranks agreed on in the last collectives
/// of one kind, most recent first. Both ranks update their copy from the same headers after every
/// collective that succeeded, so both hold the same entries.
class AgreedSizes {
 public:
  static constexpr int kRemembered = 4;
  /// The entry holding `bytes`, -1 if none.
  int find(int64_t bytes) const;
  /// Makes `bytes` the most recent entry.
  void remember(int64_t bytes);

 private:
  std::array<int64_t, kRemembered> sizes_{-1, -1, -1, -1};
};

}  // namespace neuronsim::backend::distributed
