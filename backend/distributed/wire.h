#pragma once
// What the ranks of a neuron process group tell each other before every collective, in one
// fixed-size Gloo all-gather: which collective this is (so a rank that issues a different one,
// or another shape or dtype, fails with an error naming both instead of corrupting Gloo's
// transfers), when this rank reached it in simulated time (so the ranks' clocks meet), and,
// for small collectives, the data itself (so they need no second round trip).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/device_model/interconnect/collective_model.h"

namespace neuronsim::backend::distributed {

constexpr int kMaxDims = 8;

/// One rank's description of a collective. Plain data, the same layout on every rank.
struct Header {
  uint64_t magic = 0;
  uint64_t sequence = 0;   // the group's collective counter
  int64_t arrival_ps = 0;  // simulated time this rank reached the collective
  int32_t kind = 0;        // device_model::interconnect::Kind
  int32_t dtype = 0;       // c10::ScalarType
  int32_t reduce_op = -1;  // c10d::ReduceOp::RedOpType, -1 if none
  int32_t root = -1;       // broadcast/reduce/gather/scatter root, -1 if none
  int32_t ndim = 0;        // of the first tensor (dims beyond kMaxDims are folded into the last)
  int32_t tensors = 0;     // tensors in the call (coalesced forms: more than one)
  int64_t dims[kMaxDims] = {};
  uint64_t shapes_hash = 0;    // every tensor's shape
  int64_t payload_bytes = -1;  // bytes of data in this slot, -1 when the data is too large
  int64_t model_bytes = 0;     // the collective's size for the timing model (nccl-tests size)
  // Posted data (posted_data.h), for the header's recipient: the bytes this rank sends it and
  // the bytes it expects from it.
  int64_t sends_bytes = 0;
  int64_t expects_bytes = 0;
  // The Gloo tags of that data beyond the slot: the one this rank receives the recipient's data
  // on, and the one it sent its own on before reading the recipient's header (-1: none).
  int32_t recv_tag = -1;
  int32_t send_tag = -1;
};

/// The slot layout: header, then (all_to_all) the bytes this rank sends to and receives from
/// each rank, then up to `inline_bytes` of data. Every rank uses the same layout.
struct SlotLayout {
  int64_t ranks = 0;
  int64_t inline_bytes = 0;
  int64_t splits_offset() const;
  int64_t payload_offset() const;
  int64_t slot_bytes() const;
  /// Of data of `bytes`, the bytes that travel in the slot: all or (posted data larger than a
  /// slot, which travels in a message of its own) none.
  int64_t in_slot(int64_t bytes) const {
    return bytes <= inline_bytes ? std::max<int64_t>(bytes, 0) : 0;
  }
};

/// The collective this rank is about to issue, as it describes itself to the others.
struct Call {
  device_model::interconnect::Kind kind = device_model::interconnect::Kind::kAllReduce;
  const char* name = "";
  at::ScalarType dtype = at::kFloat;
  std::vector<at::IntArrayRef> shapes;  // every tensor whose shape must agree
  int reduce_op = -1;
  int root = -1;
  uint64_t model_bytes = 0;
  std::vector<int64_t> send_splits, recv_splits;  // all_to_all, bytes per rank
};

/// This rank's header for `call`.
Header make_header(const Call& call, uint64_t sequence, int64_t arrival_ps, int64_t payload_bytes);

/// Checks that every rank described the same collective; throws c10::Error naming the first
/// difference (ranks, shapes, dtypes, reduce ops, roots, split sizes).
void check_agreement(const Call& call, const std::vector<Header>& headers,
                     const std::vector<std::vector<int64_t>>& send_splits,
                     const std::vector<std::vector<int64_t>>& recv_splits,
                     const std::string& group);

/// Posted data: checks that what each peer sends this rank (`me`) is what it expects and the
/// reverse (`expects`, `sends`: bytes by peer); throws c10::Error naming the first difference.
void check_posted_sizes(const Call& call, const std::vector<Header>& headers, int me,
                        const std::vector<int64_t>& expects, const std::vector<int64_t>& sends,
                        const std::string& group);

/// "float32[4, 8]" for messages.
std::string describe(const Header& h);

}  // namespace neuronsim::backend::distributed
