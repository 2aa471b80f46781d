#pragma once
// The `neuron` c10d backend: collectives on neuron tensors whose data moves through a Gloo
// process group this backend owns (zero-copy CPU views of the device tensors: simulated HBM is
// host memory) and whose time comes from the collective model, placed on this rank's device
// timeline where the ranks' clocks meet. See docs/distributed.md.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/host_ops.h"
#include "distributed/posted_data.h"
#include "distributed/wire.h"
#include "neuronsim/device_model/interconnect/collective_model.h"
#include "neuronsim/runtime/runtime.h"

namespace neuronsim::backend::distributed {

/// Issuing a collective (or a send or receive) costs the host what launching a kernel does:
/// charged to the host clock and shown on the trace's host row; returns when the issue began.
sim::SimTime charge_issue(runtime::Runtime& r, const char* what);

struct BackendOptions {
  c10::DeviceIndex device = 0;  // this rank's neuron device
  std::string group;            // the process group's name (trace rows, messages)
  /// Every modelled rank's NeuronCore, by group rank (ranks_per_process entries per process).
  std::vector<device_model::interconnect::RankPlace> places;
  /// Modelled ranks per process: a group of N processes times collectives of N x k ranks (k
  /// consecutive NeuronCores each), while the data moves between the N processes. For
  /// benchmarks of large groups on small machines (NEURON_SIM_CC_MODEL_RANKS); 1 otherwise.
  int ranks_per_process = 1;
  /// Data up to this many bytes per peer travels in the header's slot; larger data of the
  /// collectives that post it (posted_data.h) as messages of this size before its tail.
  int64_t inline_bytes = 0;
  std::chrono::milliseconds timeout{0};
};

class NeuronBackend final : public c10d::Backend {
 public:
  /// `gloo` moves the data; it must span the same ranks. Builds the group's collective model
  /// (throws for impossible placements: two ranks on one NeuronCore, a core the instance lacks).
  NeuronBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> gloo, BackendOptions opts);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void abort() override;
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;

 private:
  /// One collective as this backend runs it: the description every rank exchanges, this rank's
  /// data if it is small enough to travel along, and how to finish either way.
  struct Plan {
    Call call;
    c10d::OpType type = c10d::OpType::UNKNOWN;
    std::vector<at::Tensor> outputs;  // the Work's result
    Bytes payload;                    // this rank's data, the same for every peer (or none)
    std::function<Bytes(int)> part;   // or what each peer gets (this rank's own part included)
    /// Part mode: from_slots reads this rank's own part from its input, not from its slot.
    bool own_part_direct = false;
    std::function<void(const Gathered&)> from_slots;               // small: fills outputs
    std::function<c10::intrusive_ptr<c10d::Work>()> through_gloo;  // large: issues Gloo's op
    std::function<void()> after_gloo;                              // AVG, PREMUL_SUM
    /// Posted data (set by the collectives whose direct exchange moves no more than Gloo's
    /// collective would): data of any size travels with the header (posted_data.h), never
    /// through_gloo. `landing` says where a peer's data goes (in `scratch`, a buffer of
    /// `scratch_bytes` that run() lends, or in an output), `landed` finishes once every peer's
    /// data is there (this rank's own part, reductions). Unless some data was too large for a
    /// slot, from_slots finishes instead, as for inline data.
    std::function<Landing(int peer, uint8_t* scratch)> landing;
    int64_t scratch_bytes = 0;
    /// `landed` may exchange more data through `next` (a second step, on `next_tag`).
    std::function<void(uint8_t* scratch, PostedData& next, int next_tag)> landed;
    bool land_always = false;  // finish with `landed` even when all data fit in the slots
  };
  c10::intrusive_ptr<c10d::Work> run(Plan& plan);
  /// Posted data of an all-gather: peers' chunks of `chunk` bytes land in `regions` (by rank).
  void land_gathered(Plan& p, const at::Tensor& in, const std::vector<uint8_t*>& regions,
                     int64_t chunk) const;
  /// Posted data of a reduce-scatter: peers' chunks for this rank land in scratch rows and are
  /// reduced with this rank's own chunk (at `own_chunk()`) into `out`.
  void land_reduced_chunks(Plan& p, const at::Tensor& out, const c10d::ReduceOp& op,
                           std::function<uint8_t*()> own_chunk) const;
  /// Posts the receives of the next collective's headers (one per peer, into `gathered_`) unless
  /// they are posted: posted early, a peer's header travels as soon as it is sent (Gloo sends a
  /// message only to a posted receive) and the exchange costs one message per peer, no round trip.
  void post_header_recvs();
  /// post_header_recvs after a collective completed, never throwing: a peer whose last
  /// collective this was may have exited already, closing its connection, and that is no error
  /// of this collective. The receives then stay unposted, and the next collective's own post
  /// raises the error (as that collective's failure, naming it).
  void post_next_header_recvs() noexcept;
  /// After a failed agreement check: completes the messages of posted data that this rank and
  /// its peers posted before the check (posted_data.h); `early_tag` and `recv_tag` by peer.
  void settle_posted(PostedData& data, const std::vector<Header>& headers,
                     const std::vector<int>& early_tag, const std::vector<int>& recv_tag);

  /// A CPU view of a neuron tensor of this rank, after checking device, layout and contiguity.
  at::Tensor view_of(const at::Tensor& t, const char* collective) const;
  std::vector<at::Tensor> views_of(const std::vector<at::Tensor>& ts, const char* collective) const;
  int check_root(int64_t root, const char* collective) const;
  void check_peer(int peer, const char* collective) const;
  void check_tag(int tag, const char* collective) const;
  std::string where() const;

  c10::intrusive_ptr<c10d::Backend> gloo_;
  BackendOptions opts_;
  SlotLayout layout_;
  uint32_t core_ = 0;  // this rank's physical NeuronCore in this process's device
  std::unique_ptr<device_model::interconnect::CollectiveModel> model_;
  uint64_t sequence_ = 0;
  at::Tensor gathered_;  // every rank's slot (this rank's included), reused by run()
  at::Tensor outbox_;    // this rank's slot for each peer, when peers get different parts
  /// The posted receives of the next headers, by peer (empty when not posted).
  std::vector<c10::intrusive_ptr<c10d::Work>> header_recvs_;
  /// A scratch buffer of at least `bytes` for run() (kept for the next collective up to a size).
  uint8_t* scratch(int64_t bytes);
  void trim_scratch();
  at::Tensor scratch_;
  /// The Gloo point-to-point tags of the header exchange and of posted data; user sends and
  /// receives may not use them.
  static constexpr int kHeaderTag = 0x7ffffff0;
  static constexpr int kDataTagBase = 0x70000000;
  /// Posted data's channels within a collective: data sent before the check, one per remembered
  /// size (AgreedSizes), data sent after the check, and a second step (Plan::landed).
  static constexpr int kAfterCheck = AgreedSizes::kRemembered;
  static constexpr int kSecondStep = kAfterCheck + 1;
  static constexpr int kKinds = 16;  // device_model::interconnect::Kind values (4 bits of a tag)
  /// A posted message's tag: the collective's sequence number (cycling), kind and channel.
  static int data_tag(uint64_t sequence, int kind, int channel);
  /// Whether data of `bytes` travels beyond the header's slot, in a message of its own.
  bool beyond_slot(int64_t bytes) const { return bytes > 0 && layout_.in_slot(bytes) == 0; }
  /// Sizes of posted data agreed with each peer (by peer, then kind): what this rank sent it and
  /// what it received from it. The peer's table for the other direction holds the same entries.
  std::vector<std::array<AgreedSizes, kKinds>> sent_agreed_, received_agreed_;
  /// The largest 2-rank all_reduce that posts its data (collectives.cpp), and the largest, in
  /// slots, that sends its whole tensor (a full exchange) rather than halves: measured on a
  /// loaded 2-core machine, the full exchange's one wait on the peer wins at 4 MiB (3.1 to 3.8 ms
  /// against 4.2 to 4.8 ms) and its extra reduction loses at 16 MiB (8.8 to 9.9 ms of CPU
  /// against 8.0 to 8.7 ms).
  static constexpr int64_t kPostedAllReduceMax = int64_t{64} << 20;
  static constexpr int64_t kFullExchangeSlots = 4;
  std::mutex mutex_;  // one collective is described, exchanged and placed at a time
};

}  // namespace neuronsim::backend::distributed
