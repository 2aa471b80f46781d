#pragma once
// Data larger than a header slot, posted together with the header: every rank posts the receive
// of each peer's data (its part beyond what the header's slot carries, one message) before it
// sends its header, and sends its own once it has read the peers' headers, so the data of a
// collective of any size travels in the one synchronisation of the ranks that the header
// exchange is (not the header exchange, then Gloo's collective). A rank sends a peer data only
// after its header showed that the peer expects exactly that many bytes, so a message never
// meets a shorter receive (Gloo's transport thread would terminate the process,
// "op.preamble.length <= op.nbytes"). When the ranks disagree, no data is sent and the posted
// receives are dropped: a collective's messages use a tag of their own, so nothing meets them
// later. Everything goes through the Gloo group's point-to-point API.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <vector>

namespace neuronsim::backend::distributed {

/// Where a peer's data lands on this rank and how many bytes this rank expects from it.
struct Landing {
  uint8_t* data = nullptr;
  int64_t size = 0;
};

/// The posted messages of one collective; dropping it cancels the receives no one sent to.
class PostedData {
 public:
  /// `tag`: the collective's own Gloo tag.
  PostedData(c10d::Backend& gloo, int tag) : gloo_(gloo), tag_(tag) {}
  void post_recv(int peer, uint8_t* into, int64_t bytes);
  void post_send(int peer, const uint8_t* from, int64_t bytes);
  /// Waits for every message (each under the process group's timeout); throws Gloo's error.
  void wait_all();

 private:
  c10d::Backend& gloo_;
  int tag_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

}  // namespace neuronsim::backend::distributed
