#include "distributed/neuron_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "accelerator/context.h"
#include "aten/device_tensor.h"
#include "distributed/neuron_work.h"
#include "neuronsim/runtime/trace_session.h"

namespace neuronsim::backend::distributed {

using device_model::interconnect::Kind;

NeuronBackend::NeuronBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> gloo,
                             BackendOptions opts)
    : c10d::Backend(rank, size), gloo_(std::move(gloo)), opts_(std::move(opts)) {
  TORCH_CHECK(gloo_ && gloo_->getSize() == size && gloo_->getRank() == rank,
              "neuron backend: the Gloo group must span the same ranks");
  TORCH_CHECK(opts_.ranks_per_process >= 1 &&
                  static_cast<int>(opts_.places.size()) == size * opts_.ranks_per_process,
              "neuron backend: one NeuronCore placement per modelled rank is needed");
  layout_.ranks = size;
  layout_.inline_bytes = opts_.inline_bytes;
  static_assert(static_cast<int>(Kind::kSendRecv) < kKinds);
  sent_agreed_.resize(size);
  received_agreed_.resize(size);
  with_runtime([&](runtime::Runtime& r) {
    core_ = r.physical_core(static_cast<uint32_t>(opts_.device));
    model_ = std::make_unique<device_model::interconnect::CollectiveModel>(
        device_model::interconnect::Topology(r.interconnect(), opts_.places));
    return 0;
  });
}

c10::intrusive_ptr<c10d::Backend::Options> NeuronBackend::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("neuron", opts_.timeout);
  o->group_name = opts_.group;
  return o;
}

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  opts_.timeout = timeout;
  gloo_->setTimeout(timeout);
}

void NeuronBackend::abort() {
  gloo_->abort();
}

void NeuronBackend::shutdown() {
  gloo_->shutdown();
}

std::string NeuronBackend::where() const {
  const auto& p = opts_.places.at(static_cast<size_t>(rank_ * opts_.ranks_per_process));
  return fmt::format("rank {} of process group '{}' (neuron:{}, NeuronCore {} of instance {})",
                     rank_, opts_.group, opts_.device, p.core, p.instance);
}

at::Tensor NeuronBackend::view_of(const at::Tensor& t, const char* collective) const {
  TORCH_CHECK(t.defined(), "neuron backend: ", collective, " got an undefined tensor");
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "neuron backend: ", collective,
              " got a tensor on ", t.device(),
              "; the neuron backend handles neuron tensors (a 'cpu:gloo,neuron:neuron' process "
              "group also takes CPU tensors)");
  TORCH_CHECK(t.device().index() == opts_.device, "neuron backend: ", collective, ": ", where(),
              " got a tensor on ", t.device(), "; each rank's tensors live on its own device");
  TORCH_CHECK(t.layout() == c10::kStrided, "neuron backend: ", collective,
              " needs dense tensors, got ", t.layout());
  TORCH_CHECK(t.is_contiguous(), "neuron backend: ", collective,
              " needs contiguous tensors (call .contiguous() first)");
  TORCH_CHECK(!t.is_complex(), "neuron backend: ", collective,
              " got a complex tensor; pass torch.view_as_real(t)");
  return cpu_view(t);
}

std::vector<at::Tensor> NeuronBackend::views_of(const std::vector<at::Tensor>& ts,
                                                const char* collective) const {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(view_of(t, collective));
  return out;
}

int NeuronBackend::check_root(int64_t root, const char* collective) const {
  TORCH_CHECK(root >= 0 && root < size_, "neuron backend: ", collective, " with root ", root,
              " in a group of ", size_, " ranks");
  return static_cast<int>(root);
}

void NeuronBackend::post_header_recvs() {
  if (!header_recvs_.empty()) return;
  const int64_t slot_bytes = layout_.slot_bytes();
  if (!gathered_.defined()) gathered_ = at::empty({size_ * slot_bytes}, at::kByte);
  header_recvs_.resize(size_);
  try {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::vector<at::Tensor> in{
          at::from_blob(gathered_.data_ptr<uint8_t>() + r * slot_bytes, {slot_bytes}, at::kByte)};
      header_recvs_[r] = gloo_->recv(in, r, kHeaderTag);
    }
  } catch (...) {
    header_recvs_.clear();
    throw;
  }
}

void NeuronBackend::post_next_header_recvs() noexcept {
  try {
    post_header_recvs();
  } catch (...) {
    // Left unposted: see the declaration.
  }
}

void NeuronBackend::check_tag(int tag, const char* collective) const {
  TORCH_CHECK(tag < kDataTagBase, "neuron backend: ", collective, " with tag ", tag,
              "; the backend reserves tags from ", kDataTagBase, " on for its collectives");
}

uint8_t* NeuronBackend::scratch(int64_t bytes) {
  if (bytes <= 0) return nullptr;
  if (!scratch_.defined() || scratch_.numel() < bytes) {
    scratch_ = at::Tensor();  // free the old buffer first
    scratch_ = at::empty({bytes}, at::kByte);
  }
  return scratch_.data_ptr<uint8_t>();
}

void NeuronBackend::trim_scratch() {
  // Kept up to 64 MiB: fresh pages cost a fault each, a noticeable part of a mid-size
  // collective's host time; larger buffers do not stay resident for the process's life.
  if (scratch_.defined() && scratch_.numel() > (int64_t{64} << 20)) scratch_ = at::Tensor();
}

void NeuronBackend::check_peer(int peer, const char* collective) const {
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "neuron backend: ", collective,
              " with peer ", peer, " from rank ", rank_, " in a group of ", size_, " ranks");
}

void NeuronBackend::settle_posted(PostedData& data, const std::vector<Header>& headers,
                                  const std::vector<int>& early_tag,
                                  const std::vector<int>& recv_tag) {
  // The ranks disagree: every message posted before the check is completed, so none is left to
  // meet Gloo's connection later (posted_data.h). A peer's receive that no message of this rank
  // meets gets zeros; a peer's message that no receive of this rank meets lands in a throwaway
  // buffer.
  std::vector<at::Tensor> buffers;
  try {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const Header& h = headers[r];
      if (h.magic != headers[rank_].magic) return;  // not this protocol's header: nothing to do
      if (h.recv_tag >= 0 && h.recv_tag != early_tag[r]) {
        buffers.push_back(at::zeros({h.expects_bytes}, at::kByte));
        data.post_send(r, buffers.back().data_ptr<uint8_t>(), h.expects_bytes, h.recv_tag);
      }
      if (h.send_tag >= 0 && h.send_tag != recv_tag[r]) {
        buffers.push_back(at::empty({h.sends_bytes}, at::kByte));
        data.post_recv(r, buffers.back().data_ptr<uint8_t>(), h.sends_bytes, h.send_tag);
      }
    }
    data.wait_all();
  } catch (...) {
    // The group is broken too (a rank exited or timed out); the disagreement is the error.
  }
}

int NeuronBackend::data_tag(uint64_t sequence, int kind, int channel) {
  // 3 bits of channel, 4 of kind, the rest the sequence number: below kHeaderTag.
  constexpr uint64_t kCycle = ((kHeaderTag - kDataTagBase) >> 7) - 1;
  return kDataTagBase + static_cast<int>(((sequence % kCycle) << 7) |
                                         (static_cast<uint64_t>(kind) << 3) |
                                         static_cast<uint64_t>(channel));
}

sim::SimTime charge_issue(runtime::Runtime& r, const char* what) {
  const sim::SimTime h0 = r.charge_launch_overhead();
  if (runtime::TraceSession* t = runtime::TraceSession::active()) {
    t->host(fmt::format("issue {}", what), "launch", h0, r.host_time());
  }
  return h0;
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::run(Plan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const c10::StreamId stream = current_stream(opts_.device).id();
  const uint32_t dev = static_cast<uint32_t>(opts_.device);
  const sim::SimTime arrival = with_runtime([&](runtime::Runtime& r) {
    const sim::SimTime a = r.arrival(dev, stream);
    charge_issue(r, plan.call.name);
    return a;
  });

  // 1. Every rank says what it is about to do and when it got there (and small data): it sends
  // its slot to every other rank, whose receives of full-size slots were posted at the end of
  // the previous collective. Gloo accepts a message shorter than the receiving buffer, so only
  // what is used travels, and ranks that disagree about sizes still get each other's headers
  // (and fail with a clear error below) instead of corrupting a Gloo collective.
  // Data goes to every peer alike (`payload`), or each peer gets its own part (`part`:
  // all_to_all, reduce_scatter, scatter), so small collectives move no more than Gloo's would.
  // Larger data of the collectives that post it goes in a message of its own (posted_data.h).
  std::vector<Bytes> parts;
  if (plan.part) {
    parts.reserve(size_);
    for (int r = 0; r < size_; ++r) parts.push_back(plan.part(r));
  }
  auto part_of = [&](int peer) -> const Bytes& { return plan.part ? parts[peer] : plan.payload; };
  int64_t largest = 0;
  for (int r = 0; r < size_; ++r) largest = std::max(largest, part_of(r).size);
  const bool posted = plan.landing && layout_.inline_bytes > 0;
  const bool fits = posted || largest <= layout_.inline_bytes;
  const uint64_t seq = ++sequence_;
  const int kind = static_cast<int>(plan.call.kind);
  Header mine = make_header(plan.call, seq, static_cast<int64_t>(arrival.ps), fits ? largest : -1);
  // Posted data: where each peer's data lands (and how much this rank expects from it), what this
  // rank sends it, and the tags of the messages beyond the slots (-1: none): the receive of the
  // peer's data, and the send of this rank's data before the check (a size both agreed on
  // before, posted_data.h).
  std::vector<Landing> lands(size_);
  std::vector<int64_t> sends_to(size_, 0);
  std::vector<int> recv_tag(size_, -1), early_tag(size_, -1);
  bool beyond = false;   // some data travels beyond the slots
  bool landing = false;  // finish with plan.landed
  uint8_t* lent = nullptr;
  if (posted) {
    lent = scratch(plan.scratch_bytes);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      lands[r] = plan.landing(r, lent);
      sends_to[r] = std::max<int64_t>(part_of(r).size, 0);
      if (beyond_slot(lands[r].size)) {
        const int known = received_agreed_[r][kind].find(lands[r].size);
        recv_tag[r] = data_tag(seq, kind, known < 0 ? kAfterCheck : known);
      }
      if (beyond_slot(sends_to[r])) {
        const int known = sent_agreed_[r][kind].find(sends_to[r]);
        if (known >= 0) early_tag[r] = data_tag(seq, kind, known);
      }
      beyond = beyond || recv_tag[r] >= 0 || beyond_slot(sends_to[r]);
    }
    landing = beyond || plan.land_always || part_of(rank_).size > layout_.inline_bytes;
  }
  // The tag this rank's data for `peer` travels on (-1: in the slot or none), given the tag it
  // was sent on before the check.
  auto sent_on = [&](int early, int64_t bytes) {
    return early >= 0 ? early : beyond_slot(bytes) ? data_tag(seq, kind, kAfterCheck) : -1;
  };
  // The header a peer gets: what it is sent and what this rank expects from it.
  auto header_for = [&](int peer) {
    Header h = mine;
    if (posted) {
      h.sends_bytes = sends_to[peer];
      h.expects_bytes = lands[peer].size;
      h.payload_bytes = layout_.in_slot(h.sends_bytes);
      h.recv_tag = recv_tag[peer];
      h.send_tag = early_tag[peer];
    }
    return h;
  };
  // Each peer gets a header of its own when the parts differ or data goes beyond the slots (the
  // tags); otherwise every peer gets this rank's slot.
  const bool per_peer = plan.part || beyond;
  if (posted && size_ > 1 && !per_peer) {
    mine = header_for(rank_ == 0 ? 1 : 0);
    for (int r = 0; r < size_; ++r) {
      TORCH_INTERNAL_ASSERT(r == rank_ || lands[r].size == mine.expects_bytes);
    }
  }
  // The exchange buffers are reused: the exchange completes before run() returns and the
  // received slots are read before the next headers' receives are posted into them.
  const int64_t slot_bytes = layout_.slot_bytes(), head = layout_.payload_offset();
  if (!gathered_.defined()) gathered_ = at::empty({size_ * slot_bytes}, at::kByte);
  Gathered g{gathered_, layout_};
  uint8_t* s = gathered_.data_ptr<uint8_t>() + rank_ * slot_bytes;
  std::memset(s, 0, head);
  std::memcpy(s, &mine, sizeof(Header));
  auto* splits = reinterpret_cast<int64_t*>(s + layout_.splits_offset());
  for (size_t i = 0; i < plan.call.send_splits.size(); ++i) {
    splits[i] = plan.call.send_splits[i];
    splits[size_ + i] = plan.call.recv_splits[i];
  }
  auto copy_part = [&](uint8_t* slot, int peer) -> int64_t {
    const Bytes& part = part_of(peer);
    if (!fits || part.size <= 0) return 0;
    const int64_t length = layout_.in_slot(part.size);  // all of it unless posted
    if (length > 0) std::memcpy(slot + head, part.data, length);
    return length;
  };
  const int64_t own = plan.part && plan.own_part_direct ? 0 : copy_part(s, rank_);
  if (per_peer && fits && !outbox_.defined()) outbox_ = at::empty({size_ * slot_bytes}, at::kByte);
  PostedData data(*gloo_);
  auto failed = [&](const char* doing) {
    return backend_error(fmt::format(
        "neuron backend: {} failed on {}: {}{}. Another rank probably exited, hung or timed out.",
        plan.call.name, where(), doing, message_of(std::current_exception())));
  };
  try {
    post_header_recvs();
    for (int r = 0; r < size_; ++r) {
      if (recv_tag[r] >= 0) data.post_recv(r, lands[r].data, lands[r].size, recv_tag[r]);
    }
    std::vector<c10::intrusive_ptr<c10d::Work>> sends;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      uint8_t* from = s;
      int64_t length = head + own;
      if (per_peer && fits) {
        from = outbox_.data_ptr<uint8_t>() + r * slot_bytes;
        std::memcpy(from, s, head);
        const Header h = header_for(r);
        std::memcpy(from, &h, sizeof(Header));
        length = head + copy_part(from, r);
      }
      std::vector<at::Tensor> v{at::from_blob(from, {length}, at::kByte)};
      sends.push_back(gloo_->send(v, r, kHeaderTag));
    }
    // Data of a size agreed before goes right behind the header (the peer's receive is up).
    for (int r = 0; r < size_; ++r) {
      if (early_tag[r] >= 0) data.post_send(r, part_of(r).data, sends_to[r], early_tag[r]);
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) header_recvs_[r]->wait();
    }
    header_recvs_.clear();
    for (auto& w : sends) w->wait();
  } catch (...) {
    header_recvs_.clear();  // the group is broken; a later collective posts afresh
    std::rethrow_exception(failed("the ranks could not exchange the collective's description: "));
  }

  // 2. All ranks agree on the collective (or all raise the same error).
  std::vector<Header> headers(size_);
  std::vector<std::vector<int64_t>> send(size_), recv(size_);
  std::vector<sim::SimTime> arrivals(size_);
  bool all_fit = true;
  const uint8_t* a = gathered_.const_data_ptr<uint8_t>();
  for (int r = 0; r < size_; ++r) {
    const uint8_t* slot_r = a + r * layout_.slot_bytes();
    std::memcpy(&headers[r], slot_r, sizeof(Header));
    arrivals[r] = sim::SimTime{static_cast<uint64_t>(headers[r].arrival_ps)};
    all_fit = all_fit && headers[r].payload_bytes >= 0;
    if (plan.call.kind == Kind::kAllToAll) {
      const auto* sp = reinterpret_cast<const int64_t*>(slot_r + layout_.splits_offset());
      send[r].assign(sp, sp + size_);
      recv[r].assign(sp + size_, sp + 2 * size_);
    }
  }
  try {
    check_agreement(plan.call, headers, send, recv, opts_.group);
    if (posted) {
      // Agreeing calls imply agreeing sizes and tags; this guards the rule that a message never
      // meets a shorter receive.
      std::vector<int64_t> expects(size_, 0);
      for (int r = 0; r < size_; ++r) expects[r] = r == rank_ ? 0 : lands[r].size;
      check_posted_sizes(plan.call, headers, rank_, expects, sends_to, opts_.group);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        TORCH_CHECK(headers[r].recv_tag == sent_on(early_tag[r], sends_to[r]) &&
                        recv_tag[r] == sent_on(headers[r].send_tag, headers[r].sends_bytes),
                    "neuron backend: ", plan.call.name, " on ", where(),
                    ": the ranks chose different tags for the data (an internal error)");
      }
    }
  } catch (const c10::Error&) {
    settle_posted(data, headers, early_tag, recv_tag);
    throw;
  }
  if (posted) {
    // The data beyond the slots not sent yet goes to the receives the peers posted.
    try {
      for (int r = 0; r < size_; ++r) {
        if (r != rank_ && early_tag[r] < 0 && beyond_slot(sends_to[r])) {
          data.post_send(r, part_of(r).data, sends_to[r], data_tag(seq, kind, kAfterCheck));
        }
      }
    } catch (...) {
      std::rethrow_exception(failed(""));
    }
  }

  // 3. The clocks meet: the collective starts when the last rank is ready. (A process that
  // models k ranks gives each of them its arrival; see BackendOptions::ranks_per_process.)
  const uint32_t k = static_cast<uint32_t>(opts_.ranks_per_process);
  std::vector<sim::SimTime> modelled;
  for (const auto& t : arrivals) modelled.insert(modelled.end(), k, t);
  device_model::interconnect::CollectiveDesc desc{plan.call.kind, plan.call.model_bytes};
  desc.root = plan.call.root < 0 ? 0 : static_cast<uint32_t>(plan.call.root) * k;
  if (plan.call.kind == Kind::kAllToAll) {
    // Every rank must time the same collective: the busiest sender sets its size.
    int64_t busiest = 0;
    for (int r = 0; r < size_; ++r) {
      busiest = std::max(busiest, std::accumulate(send[r].begin(), send[r].end(), int64_t{0}));
    }
    desc.bytes = static_cast<uint64_t>(busiest);
    // A process standing for k ranks sends each of them what its peer process gets / k: every
    // modelled rank keeps the process's input size, as in an N x k rank job. Even splits need
    // no matrix (the model's even all-to-all moves the same bytes, and its cost is cached).
    const size_t n = static_cast<size_t>(size_) * k;
    const double even = static_cast<double>(desc.bytes) / static_cast<double>(n);
    bool uneven = false;
    for (size_t p = 0; p < send.size() && !uneven; ++p) {
      for (size_t q = 0; q < send.size() && !uneven; ++q) {
        // Pairs of modelled ranks the schedule uses: different ranks (of one process if k > 1).
        if (p == q && k == 1) continue;
        uneven = static_cast<double>(send[p][q] / k) != even;
      }
    }
    if (uneven) {
      desc.matrix.resize(n * n);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) desc.matrix[i * n + j] = send[i / k][j / k] / k;
      }
    }
  }
  const runtime::CollectiveRecord placed = with_runtime([&](runtime::Runtime& r) {
    const device_model::interconnect::CollectiveCost cost = model_->cost(desc);
    runtime::CollectiveRecord rec;
    rec.name = plan.call.name;
    rec.group = opts_.group;
    rec.algorithm = cost.plan.name();
    rec.bytes = desc.bytes;
    rec.ranks = static_cast<uint32_t>(modelled.size());
    rec.arrival = arrival;
    return r.collectives().place(core_, rec, modelled, cost.duration, r.device().trace_sink());
  });

  // 4. The data: posted with the header, from the exchanged slots, or through Gloo.
  auto future = make_future(opts_.device);
  std::vector<at::Tensor> outputs = plan.outputs;
  if (posted) {
    try {
      data.wait_all();
    } catch (...) {
      std::rethrow_exception(failed(""));
    }
    // Both ranks of each pair saw the same sizes agreed: the next collective of this kind may
    // send data of these sizes before the check.
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      if (beyond_slot(sends_to[r])) sent_agreed_[r][kind].remember(sends_to[r]);
      if (beyond_slot(lands[r].size)) received_agreed_[r][kind].remember(lands[r].size);
    }
  }
  if (landing) {
    for (int r = 0; r < size_; ++r) {
      const int64_t length = r == rank_ ? 0 : layout_.in_slot(lands[r].size);
      if (length > 0) std::memcpy(lands[r].data, g.data(r), length);
    }
    try {
      PostedData next(*gloo_);
      plan.landed(lent, next, data_tag(seq, kind, kSecondStep));
    } catch (...) {
      std::rethrow_exception(failed(""));
    }
    trim_scratch();
    post_next_header_recvs();  // the slots are read: the next headers may land in them
    ScopedEventTime at_end(placed.end);
    future->markCompleted(c10::IValue(outputs));
  } else if (all_fit) {
    if (plan.from_slots) plan.from_slots(g);
    post_next_header_recvs();  // the slots are read: the next headers may land in them
    ScopedEventTime at_end(placed.end);
    future->markCompleted(c10::IValue(outputs));
  } else {
    post_next_header_recvs();  // only the headers were read
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = plan.through_gloo();
    } catch (...) {
      std::rethrow_exception(
          backend_error(fmt::format("neuron backend: {} failed on {}: {}", plan.call.name, where(),
                                    message_of(std::current_exception()))));
    }
    auto after = plan.after_gloo;
    const std::string context =
        fmt::format("neuron backend: {} failed on {}", plan.call.name, where());
    const sim::SimTime end = placed.end;
    auto complete = [future, outputs, after, context, end](std::exception_ptr error) {
      if (error) {
        future->setError(
            backend_error(fmt::format("{}: {}. Another rank probably exited, hung or timed out.",
                                      context, message_of(error))));
        return;
      }
      try {
        if (after) after();
        ScopedEventTime at_end(end);
        future->markCompleted(c10::IValue(outputs));
      } catch (...) {
        if (!future->completed()) future->setError(std::current_exception());
      }
    };
    c10::intrusive_ptr<c10::ivalue::Future> gloo_future;
    try {
      gloo_future = work->getFuture();
    } catch (const c10::Error&) {
      // Some of Gloo's works (reduce_scatter_tensor) complete only when waited on.
    }
    if (!gloo_future) {
      auto finish = [work, complete]() {
        std::exception_ptr error;
        try {
          work->wait();
        } catch (...) {
          error = std::current_exception();
        }
        complete(error);
      };
      return c10::make_intrusive<WaitedWork>(rank_, plan.type, plan.call.name, plan.outputs, future,
                                             finish);
    }
    gloo_future->addCallback([complete](c10::ivalue::Future& f) {
      complete(f.hasError() ? f.exception_ptr() : nullptr);
    });
  }
  return c10::make_intrusive<NeuronWork>(rank_, plan.type, plan.call.name, plan.outputs, future);
}

}  // namespace neuronsim::backend::distributed
