// send and recv of the neuron backend: a header message (what is sent, the sender's arrival,
// and small data, as long as they are) then, for large data, the data itself, on the same Gloo
// tag. Gloo completes point-to-point transfers only when waited on, so the timing is placed in
// wait().
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "accelerator/context.h"
#include "aten/device_tensor.h"
#include "distributed/neuron_backend.h"
#include "distributed/neuron_work.h"

namespace neuronsim::backend::distributed {

using device_model::interconnect::Kind;

c10::intrusive_ptr<c10d::Work> NeuronBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                   int tag) {
  TORCH_CHECK(tensors.size() == 1, "neuron backend: send takes one tensor");
  check_peer(dst_rank, "send");
  check_tag(tag, "send");
  const at::Tensor view = view_of(tensors[0], "send");
  const uint32_t dev = static_cast<uint32_t>(opts_.device);
  const c10::StreamId stream = current_stream(opts_.device).id();
  Call call{Kind::kSendRecv,
            "send",
            view.scalar_type(),
            {tensors[0].sizes()},
            -1,
            rank_,
            static_cast<uint64_t>(nbytes(view))};
  const int64_t bytes = nbytes(view);
  const bool fits = bytes <= layout_.inline_bytes;
  runtime::CollectiveRecord placed;
  sim::SimTime arrival;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    placed = with_runtime([&](runtime::Runtime& r) {
      arrival = r.arrival(dev, stream);
      charge_issue(r, "send");
      device_model::interconnect::CollectiveDesc d{Kind::kSendRecv, static_cast<uint64_t>(bytes)};
      d.root = static_cast<uint32_t>(rank_ * opts_.ranks_per_process);
      d.peer = static_cast<uint32_t>(dst_rank * opts_.ranks_per_process);
      const device_model::interconnect::CollectiveCost cost = model_->cost(d);
      runtime::CollectiveRecord rec;
      rec.name = fmt::format("send to {}", dst_rank);
      rec.group = opts_.group;
      rec.algorithm = "p2p";
      rec.bytes = static_cast<uint64_t>(bytes);
      rec.ranks = 2;
      rec.arrival = arrival;
      // The sender does not wait for the receiver (its data is buffered at the peer).
      return r.collectives().place_p2p(core_, rec, arrival, cost.duration, r.device().trace_sink());
    });
  }
  // The header and small data in one message, as long as they are: the receiver posts a
  // full slot and Gloo accepts a shorter message.
  const Header h = make_header(call, 0, static_cast<int64_t>(arrival.ps), fits ? bytes : -1);
  const int64_t head = layout_.payload_offset();
  at::Tensor slot = at::empty({head + (fits ? bytes : 0)}, at::kByte);
  std::memset(slot.data_ptr(), 0, head);
  std::memcpy(slot.data_ptr(), &h, sizeof(Header));
  if (fits && bytes > 0) std::memcpy(slot.data_ptr<uint8_t>() + head, view.data_ptr(), bytes);
  std::vector<at::Tensor> sv{slot};
  auto header_work = gloo_->send(sv, dst_rank, tag);
  c10::intrusive_ptr<c10d::Work> data_work;
  if (!fits) {
    std::vector<at::Tensor> dv{view};
    data_work = gloo_->send(dv, dst_rank, tag);
  }
  auto future = make_future(opts_.device);
  const std::string context =
      fmt::format("neuron backend: send to rank {} failed on {}", dst_rank, where());
  const sim::SimTime end = placed.end;
  auto finish = [future, header_work, data_work, slot, context, end]() {
    try {
      header_work->wait();
      if (data_work) data_work->wait();
    } catch (...) {
      std::rethrow_exception(
          backend_error(fmt::format("{}: {}", context, message_of(std::current_exception()))));
    }
    ScopedEventTime at_end(end);
    future->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
  };
  return c10::make_intrusive<WaitedWork>(rank_, c10d::OpType::SEND, "send",
                                         std::vector<at::Tensor>{}, future, finish);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                   int tag) {
  TORCH_CHECK(tensors.size() == 1, "neuron backend: recv takes one tensor");
  check_peer(src_rank, "recv");
  check_tag(tag, "recv");
  const at::Tensor view = view_of(tensors[0], "recv");
  const uint32_t dev = static_cast<uint32_t>(opts_.device);
  const c10::StreamId stream = current_stream(opts_.device).id();
  const sim::SimTime arrival = with_runtime([&](runtime::Runtime& r) {
    const sim::SimTime a = r.arrival(dev, stream);
    charge_issue(r, "recv");
    return a;
  });
  Call call{Kind::kSendRecv,
            "recv",
            view.scalar_type(),
            {tensors[0].sizes()},
            -1,
            src_rank,
            static_cast<uint64_t>(nbytes(view))};
  const Header mine = make_header(call, 0, 0, 0);
  at::Tensor slot = at::empty({layout_.slot_bytes()}, at::kByte);
  std::vector<at::Tensor> sv{slot};
  auto header_work = gloo_->recv(sv, src_rank, tag);
  auto future = make_future(opts_.device);
  const std::string context =
      fmt::format("neuron backend: recv from rank {} failed on {}", src_rank, where());
  const SlotLayout layout = layout_;
  auto self = c10::intrusive_ptr<NeuronBackend>::reclaim_copy(this);
  std::vector<at::Tensor> outputs = tensors;
  auto finish = [self, future, header_work, slot, view, outputs, src_rank, tag, arrival, mine,
                 layout, context]() {
    try {
      header_work->wait();
    } catch (...) {
      std::rethrow_exception(
          backend_error(fmt::format("{}: {}", context, message_of(std::current_exception()))));
    }
    Header h;
    std::memcpy(&h, slot.data_ptr(), sizeof(Header));
    TORCH_CHECK(h.kind == mine.kind && h.dtype == mine.dtype && h.shapes_hash == mine.shapes_hash,
                "neuron backend: recv from rank ", src_rank, ": the sender sent ", describe(h),
                ", this rank expects ", describe(mine));
    if (h.payload_bytes >= 0) {
      if (h.payload_bytes > 0) {
        std::memcpy(view.data_ptr(), slot.data_ptr<uint8_t>() + layout.payload_offset(),
                    h.payload_bytes);
      }
    } else {
      try {
        std::vector<at::Tensor> dv{view};
        self->gloo_->recv(dv, src_rank, tag)->wait();
      } catch (...) {
        std::rethrow_exception(
            backend_error(fmt::format("{}: {}", context, message_of(std::current_exception()))));
      }
    }
    const uint64_t bytes = static_cast<uint64_t>(nbytes(view));
    const runtime::CollectiveRecord placed = with_runtime([&](runtime::Runtime& r) {
      device_model::interconnect::CollectiveDesc d{Kind::kSendRecv, bytes};
      d.root = static_cast<uint32_t>(src_rank * self->opts_.ranks_per_process);
      d.peer = static_cast<uint32_t>(self->rank_ * self->opts_.ranks_per_process);
      const device_model::interconnect::CollectiveCost cost = self->model_->cost(d);
      runtime::CollectiveRecord rec;
      rec.name = fmt::format("recv from {}", src_rank);
      rec.group = self->opts_.group;
      rec.algorithm = "p2p";
      rec.bytes = bytes;
      rec.ranks = 2;
      rec.arrival = arrival;
      // The receiver waits for the sender to arrive.
      return r.collectives().place_p2p(self->core_, rec,
                                       sim::SimTime{static_cast<uint64_t>(h.arrival_ps)},
                                       cost.duration, r.device().trace_sink());
    });
    ScopedEventTime at_end(placed.end);
    future->markCompleted(c10::IValue(outputs));
  };
  return c10::make_intrusive<WaitedWork>(rank_, c10d::OpType::RECV, "recv", tensors, future,
                                         finish);
}

}  // namespace neuronsim::backend::distributed
