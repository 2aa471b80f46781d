#include "distributed/neuron_backend.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "aten/device_tensor.h"
#include "distributed/neuron_work.h"
#include "accelerator/context.h"

namespace neuronsim::backend::distributed {

using collectives::Kind;

namespace {

int64_t nbytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

int64_t total_bytes(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += nbytes(t);
  return n;
}

// Concatenated bytes of CPU tensors.
at::Tensor concat_bytes(const std::vector<at::Tensor>& cpu) {
  std::vector<at::Tensor> parts;
  for (const auto& t : cpu) parts.push_back(bytes_of(t));
  return parts.size() == 1 ? parts.front() : at::cat(parts);
}

// A c10d::DistBackendError carrying `what` (torch.distributed.DistBackendError in Python).
std::exception_ptr backend_error(const std::string& what) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, __LINE__}, what));
}

std::string first_line(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

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
  with_runtime([&](runtime::Runtime& r) {
    core_ = r.physical_core(static_cast<uint32_t>(opts_.device));
    model_ = std::make_unique<collectives::CollectiveModel>(
        collectives::Topology(r.interconnect(), opts_.places));
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

void NeuronBackend::check_tag(int tag, const char* collective) const {
  TORCH_CHECK(tag != kHeaderTag, "neuron backend: ", collective, " with tag ", tag,
              ", which the backend reserves for its collectives' headers");
}

void NeuronBackend::check_peer(int peer, const char* collective) const {
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "neuron backend: ", collective,
              " with peer ", peer, " from rank ", rank_, " in a group of ", size_, " ranks");
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::run(Plan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const c10::StreamId stream = current_stream(opts_.device).id();
  const uint32_t dev = static_cast<uint32_t>(opts_.device);
  const sim::SimTime arrival = with_runtime([&](runtime::Runtime& r) {
    const sim::SimTime a = r.arrival(dev, stream);
    // Issuing a collective costs the host what launching a kernel does.
    r.host_advance(sim::SimTime::from_ns(r.device().params().host.kernel_launch_overhead_ns));
    return a;
  });

  // 1. Every rank says what it is about to do and when it got there (and small data): it sends
  // its slot to every other rank and receives theirs into full-size slots. Gloo accepts a
  // message shorter than the receiving buffer, so only what is used travels, and ranks that
  // disagree about sizes still get each other's headers (and fail with a clear error below)
  // instead of corrupting a Gloo collective.
  // Data goes to every peer alike (`payload`), or each peer gets its own part (`part`:
  // all_to_all, reduce_scatter, scatter), so small collectives move no more than Gloo's would.
  auto part_of = [&](int peer) { return plan.part ? plan.part(peer) : plan.payload; };
  int64_t largest = 0;
  for (int r = 0; r < size_; ++r) {
    const at::Tensor part = part_of(r);
    if (part.defined()) largest = std::max(largest, part.numel());
  }
  const bool fits = largest <= layout_.inline_bytes;
  const Header mine =
      make_header(plan.call, ++sequence_, static_cast<int64_t>(arrival.ps), fits ? largest : -1);
  // The exchange buffers are reused: the exchange completes before run() returns and the
  // received slots are read only here.
  const int64_t slot_bytes = layout_.slot_bytes(), head = layout_.payload_offset();
  if (!gathered_.defined()) gathered_ = at::empty({size_ * slot_bytes}, at::kByte);
  Gathered g{gathered_, layout_};
  uint8_t* s = g.all.data_ptr<uint8_t>() + rank_ * slot_bytes;
  std::memset(s, 0, head);
  std::memcpy(s, &mine, sizeof(Header));
  auto* splits = reinterpret_cast<int64_t*>(s + layout_.splits_offset());
  for (size_t i = 0; i < plan.call.send_splits.size(); ++i) {
    splits[i] = plan.call.send_splits[i];
    splits[size_ + i] = plan.call.recv_splits[i];
  }
  auto copy_part = [&](uint8_t* slot, int peer) -> int64_t {
    const at::Tensor part = part_of(peer);
    if (!fits || !part.defined() || part.numel() == 0) return 0;
    std::memcpy(slot + head, part.data_ptr(), part.numel());
    return part.numel();
  };
  const int64_t own = copy_part(s, rank_);
  if (plan.part && fits && !outbox_.defined()) outbox_ = at::empty({size_ * slot_bytes}, at::kByte);
  try {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::vector<at::Tensor> in{g.all.narrow(0, r * slot_bytes, slot_bytes)};
      works.push_back(gloo_->recv(in, r, kHeaderTag));
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      at::Tensor out;
      if (plan.part && fits) {
        uint8_t* o = outbox_.data_ptr<uint8_t>() + r * slot_bytes;
        std::memcpy(o, s, head);
        out = outbox_.narrow(0, r * slot_bytes, head + copy_part(o, r));
      } else {
        out = g.all.narrow(0, rank_ * slot_bytes, head + own);
      }
      std::vector<at::Tensor> v{out};
      works.push_back(gloo_->send(v, r, kHeaderTag));
    }
    for (auto& w : works) w->wait();
  } catch (...) {
    std::rethrow_exception(backend_error(
        fmt::format("neuron backend: {} failed on {}: the ranks could not exchange the "
                    "collective's description ({}). Another rank probably exited, hung or timed "
                    "out.",
                    plan.call.name, where(), first_line(std::current_exception()))));
  }

  // 2. All ranks agree on the collective (or all raise the same error).
  std::vector<Header> headers(size_);
  std::vector<std::vector<int64_t>> send(size_), recv(size_);
  std::vector<sim::SimTime> arrivals(size_);
  bool all_fit = true;
  const uint8_t* a = g.all.data_ptr<uint8_t>();
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
  check_agreement(plan.call, headers, send, recv, opts_.group);

  // 3. The clocks meet: the collective starts when the last rank is ready. (A process that
  // models k ranks gives each of them its arrival; see BackendOptions::ranks_per_process.)
  const uint32_t k = static_cast<uint32_t>(opts_.ranks_per_process);
  std::vector<sim::SimTime> modelled;
  for (const auto& t : arrivals) modelled.insert(modelled.end(), k, t);
  collectives::CollectiveDesc desc{plan.call.kind, plan.call.model_bytes};
  desc.root = plan.call.root < 0 ? 0 : static_cast<uint32_t>(plan.call.root) * k;
  if (plan.call.kind == Kind::kAllToAll) {
    // Every rank must time the same collective: the busiest sender sets its size.
    int64_t busiest = 0;
    for (int r = 0; r < size_; ++r) {
      busiest = std::max(busiest, std::accumulate(send[r].begin(), send[r].end(), int64_t{0}));
    }
    desc.bytes = static_cast<uint64_t>(busiest);
    // A process standing for k ranks sends each of them what its peer process gets / k: every
    // modelled rank keeps the process's input size, as in an N x k rank job.
    const size_t n = static_cast<size_t>(size_) * k;
    desc.matrix.resize(n * n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) desc.matrix[i * n + j] = send[i / k][j / k] / k;
    }
  }
  const runtime::CollectiveRecord placed = with_runtime([&](runtime::Runtime& r) {
    const collectives::CollectiveCost cost = model_->cost(desc);
    runtime::CollectiveRecord rec;
    rec.name = plan.call.name;
    rec.group = opts_.group;
    rec.algorithm = cost.plan.name();
    rec.bytes = desc.bytes;
    rec.ranks = static_cast<uint32_t>(modelled.size());
    rec.arrival = arrival;
    return r.collectives().place(core_, rec, modelled, cost.duration, r.device().trace_sink());
  });

  // 4. The data: from the exchanged slots, or through Gloo.
  auto future = make_future(opts_.device);
  std::vector<at::Tensor> outputs = plan.outputs;
  if (all_fit) {
    if (plan.from_slots) plan.from_slots(g);
    ScopedEventTime at_end(placed.end);
    future->markCompleted(c10::IValue(outputs));
  } else {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = plan.through_gloo();
    } catch (...) {
      std::rethrow_exception(
          backend_error(fmt::format("neuron backend: {} failed on {}: {}", plan.call.name, where(),
                                    first_line(std::current_exception()))));
    }
    auto after = plan.after_gloo;
    const std::string context =
        fmt::format("neuron backend: {} failed on {}", plan.call.name, where());
    const sim::SimTime end = placed.end;
    auto complete = [future, outputs, after, context, end](std::exception_ptr error) {
      if (error) {
        future->setError(
            backend_error(fmt::format("{}: {}. Another rank probably exited, hung or timed out.",
                                      context, first_line(error))));
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

// ---- collectives ----

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "neuron backend: all_reduce takes one tensor per rank");
  const at::Tensor view = view_of(tensors[0], "all_reduce");
  check_reduce_op(opts.reduceOp, view.scalar_type(), "all_reduce");
  Plan p;
  p.call = {Kind::kAllReduce,
            "all_reduce",
            view.scalar_type(),
            {tensors[0].sizes()},
            static_cast<int>(opts.reduceOp.op_),
            -1,
            static_cast<uint64_t>(nbytes(view))};
  p.type = c10d::OpType::ALLREDUCE;
  p.outputs = tensors;
  p.payload = bytes_of(view);
  const c10d::ReduceOp op = opts.reduceOp;
  p.from_slots = [view, op](const Gathered& g) {
    reduce_ranks(g.stacked(view.scalar_type(), view.numel()), op, view);
  };
  auto gloo = gloo_;
  const int64_t n = size_;
  p.through_gloo = [gloo, view, op, opts]() {
    std::vector<at::Tensor> v{view};
    c10d::AllreduceOptions o = opts;
    o.reduceOp = gloo_reduce_op(op);
    return gloo->allreduce(v, o);
  };
  p.after_gloo = [view, op, n]() { finish_reduction(view, op, n); };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "neuron backend: broadcast takes one tensor per rank");
  const at::Tensor view = view_of(tensors[0], "broadcast");
  const int root = check_root(opts.rootRank, "broadcast");
  Plan p;
  p.call = {Kind::kBroadcast,
            "broadcast",
            view.scalar_type(),
            {tensors[0].sizes()},
            -1,
            root,
            static_cast<uint64_t>(nbytes(view))};
  p.type = c10d::OpType::BROADCAST;
  p.outputs = tensors;
  p.payload = bytes_of(view);
  const bool is_root = rank_ == root;
  p.from_slots = [view, root, is_root](const Gathered& g) {
    if (!is_root) view.view({-1}).copy_(g.of(root, view.scalar_type(), view.numel()));
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, view, opts]() {
    std::vector<at::Tensor> v{view};
    return gloo->broadcast(v, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "neuron backend: reduce takes one tensor per rank");
  const at::Tensor view = view_of(tensors[0], "reduce");
  check_reduce_op(opts.reduceOp, view.scalar_type(), "reduce");
  const int root = check_root(opts.rootRank, "reduce");
  Plan p;
  p.call = {Kind::kReduce,
            "reduce",
            view.scalar_type(),
            {tensors[0].sizes()},
            static_cast<int>(opts.reduceOp.op_),
            root,
            static_cast<uint64_t>(nbytes(view))};
  p.type = c10d::OpType::REDUCE;
  p.outputs = tensors;
  p.payload = bytes_of(view);
  const c10d::ReduceOp op = opts.reduceOp;
  const bool is_root = rank_ == root;
  p.from_slots = [view, op, is_root](const Gathered& g) {
    if (is_root) reduce_ranks(g.stacked(view.scalar_type(), view.numel()), op, view);
  };
  auto gloo = gloo_;
  const int64_t n = size_;
  p.through_gloo = [gloo, view, op, opts]() {
    std::vector<at::Tensor> v{view};
    c10d::ReduceOptions o = opts;
    o.reduceOp = gloo_reduce_op(op);
    return gloo->reduce(v, o);
  };
  p.after_gloo = [view, op, n, is_root]() {
    if (is_root) finish_reduction(view, op, n);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  const at::Tensor in = view_of(input, "all_gather_into_tensor");
  const at::Tensor out = view_of(output, "all_gather_into_tensor");
  TORCH_CHECK(out.numel() == in.numel() * size_ && out.scalar_type() == in.scalar_type(),
              "neuron backend: all_gather_into_tensor needs an output of ", size_,
              " x the input's elements and the input's dtype; got input ", in.scalar_type(),
              in.sizes(), " and output ", out.scalar_type(), out.sizes());
  Plan p;
  p.call = {Kind::kAllGather,
            "all_gather_into_tensor",
            in.scalar_type(),
            {input.sizes()},
            -1,
            -1,
            static_cast<uint64_t>(nbytes(out))};
  p.type = c10d::OpType::_ALLGATHER_BASE;
  p.outputs = {output};
  p.payload = bytes_of(in);
  p.from_slots = [in, out](const Gathered& g) {
    out.view({g.layout.ranks, -1}).copy_(g.stacked(in.scalar_type(), in.numel()));
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, out, opts]() {
    at::Tensor o = out, i = in;
    return gloo->_allgather_base(o, i, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(
      inputs.size() == 1 && outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
      "neuron backend: all_gather takes one input and a list of ", size_, " outputs per rank");
  const at::Tensor in = view_of(inputs[0], "all_gather");
  std::vector<at::Tensor> outs = views_of(outputs[0], "all_gather");
  for (const auto& o : outs) {
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "neuron backend: all_gather outputs must match the input (", in.scalar_type(),
                in.sizes(), "), got ", o.scalar_type(), o.sizes());
  }
  Plan p;
  p.call = {Kind::kAllGather,
            "all_gather",
            in.scalar_type(),
            {inputs[0].sizes()},
            -1,
            -1,
            static_cast<uint64_t>(nbytes(in) * size_)};
  p.type = c10d::OpType::ALLGATHER;
  p.outputs = outputs[0];
  p.payload = bytes_of(in);
  p.from_slots = [in, outs](const Gathered& g) {
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].view({-1}).copy_(g.of(static_cast<int64_t>(r), in.scalar_type(), in.numel()));
    }
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, outs, opts]() {
    std::vector<std::vector<at::Tensor>> o{outs};
    std::vector<at::Tensor> i{in};
    return gloo->allgather(o, i, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(),
              "neuron backend: allgather_into_tensor_coalesced needs one output per input");
  std::vector<at::Tensor> ins = views_of(inputs, "allgather_into_tensor_coalesced");
  std::vector<at::Tensor> outs = views_of(outputs, "allgather_into_tensor_coalesced");
  Plan p;
  p.call.kind = Kind::kAllGather;
  p.call.name = "allgather_into_tensor_coalesced";
  p.call.dtype = ins[0].scalar_type();
  for (size_t i = 0; i < ins.size(); ++i) {
    TORCH_CHECK(ins[i].scalar_type() == p.call.dtype && outs[i].scalar_type() == p.call.dtype &&
                    outs[i].numel() == ins[i].numel() * size_,
                "neuron backend: allgather_into_tensor_coalesced needs tensors of one dtype and "
                "outputs of ",
                size_, " x their input's elements");
    p.call.shapes.push_back(inputs[i].sizes());
  }
  p.call.model_bytes = static_cast<uint64_t>(total_bytes(outs));
  p.type = c10d::OpType::COALESCED;
  p.outputs = outputs;
  p.payload = concat_bytes(ins);
  p.from_slots = [ins, outs](const Gathered& g) {
    int64_t offset = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      outs[i]
          .view({g.layout.ranks, -1})
          .copy_(g.stacked(ins[i].scalar_type(), ins[i].numel(), offset));
      offset += nbytes(ins[i]);
    }
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, ins, outs, opts]() {
    std::vector<at::Tensor> o = outs, i = ins;
    return gloo->allgather_into_tensor_coalesced(o, i, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "neuron backend: gather takes one input per rank");
  const int root = check_root(opts.rootRank, "gather");
  const at::Tensor in = view_of(inputs[0], "gather");
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "neuron backend: gather's root needs a list of ", size_, " outputs");
    outs = views_of(outputs[0], "gather");
  }
  Plan p;
  p.call = {Kind::kGather,
            "gather",
            in.scalar_type(),
            {inputs[0].sizes()},
            -1,
            root,
            static_cast<uint64_t>(nbytes(in) * size_)};
  p.type = c10d::OpType::GATHER;
  if (rank_ == root) p.outputs = outputs[0];
  p.payload = bytes_of(in);
  p.from_slots = [in, outs](const Gathered& g) {
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].view({-1}).copy_(g.of(static_cast<int64_t>(r), in.scalar_type(), in.numel()));
    }
  };
  auto gloo = gloo_;
  const bool is_root = rank_ == root;
  p.through_gloo = [gloo, in, outs, opts, is_root]() {
    std::vector<std::vector<at::Tensor>> o;
    if (is_root) o.push_back(outs);
    std::vector<at::Tensor> i{in};
    return gloo->gather(o, i, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "neuron backend: scatter takes one output per rank");
  const int root = check_root(opts.rootRank, "scatter");
  const at::Tensor out = view_of(outputs[0], "scatter");
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "neuron backend: scatter's root needs a list of ", size_, " inputs");
    ins = views_of(inputs[0], "scatter");
  }
  Plan p;
  p.call = {Kind::kScatter,
            "scatter",
            out.scalar_type(),
            {outputs[0].sizes()},
            -1,
            root,
            static_cast<uint64_t>(nbytes(out) * size_)};
  p.type = c10d::OpType::SCATTER;
  p.outputs = outputs;
  // The root sends each rank its chunk; the others send nothing.
  std::vector<at::Tensor> parts;
  for (const auto& i : ins) parts.push_back(bytes_of(i));
  p.part = [parts](int peer) { return parts.empty() ? at::Tensor() : parts[peer]; };
  p.from_slots = [out, root](const Gathered& g) {
    out.view({-1}).copy_(g.of(root, out.scalar_type(), out.numel()));
  };
  auto gloo = gloo_;
  const bool is_root = rank_ == root;
  p.through_gloo = [gloo, out, ins, opts, is_root]() {
    std::vector<at::Tensor> o{out};
    std::vector<std::vector<at::Tensor>> i;
    if (is_root) i.push_back(ins);
    return gloo->scatter(o, i, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const at::Tensor in = view_of(input, "reduce_scatter_tensor");
  const at::Tensor out = view_of(output, "reduce_scatter_tensor");
  check_reduce_op(opts.reduceOp, in.scalar_type(), "reduce_scatter_tensor");
  TORCH_CHECK(in.numel() == out.numel() * size_ && out.scalar_type() == in.scalar_type(),
              "neuron backend: reduce_scatter_tensor needs an input of ", size_,
              " x the output's elements and the output's dtype; got input ", in.scalar_type(),
              in.sizes(), " and output ", out.scalar_type(), out.sizes());
  Plan p;
  p.call = {Kind::kReduceScatter,
            "reduce_scatter_tensor",
            in.scalar_type(),
            {input.sizes()},
            static_cast<int>(opts.reduceOp.op_),
            -1,
            static_cast<uint64_t>(nbytes(in))};
  p.type = c10d::OpType::_REDUCE_SCATTER_BASE;
  p.outputs = {output};
  // Each peer gets the chunk it reduces.
  const at::Tensor in_bytes = bytes_of(in);
  const int64_t chunk = nbytes(out);
  p.part = [in_bytes, chunk](int peer) { return in_bytes.narrow(0, peer * chunk, chunk); };
  const c10d::ReduceOp op = opts.reduceOp;
  p.from_slots = [out, op](const Gathered& g) {
    reduce_ranks(g.stacked(out.scalar_type(), out.numel()), op, out);
  };
  auto gloo = gloo_;
  const int64_t n = size_;
  p.through_gloo = [gloo, in, out, op, opts]() {
    at::Tensor o = out, i = in;
    c10d::ReduceScatterOptions ro = opts;
    ro.reduceOp = gloo_reduce_op(op);
    return gloo->_reduce_scatter_base(o, i, ro);
  };
  p.after_gloo = [out, op, n]() { finish_reduction(out, op, n); };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(
      outputs.size() == 1 && inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
      "neuron backend: reduce_scatter takes one output and a list of ", size_, " inputs per rank");
  const at::Tensor out = view_of(outputs[0], "reduce_scatter");
  std::vector<at::Tensor> ins = views_of(inputs[0], "reduce_scatter");
  check_reduce_op(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  for (const auto& i : ins) {
    TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                "neuron backend: reduce_scatter inputs must match the output (", out.scalar_type(),
                out.sizes(), "), got ", i.scalar_type(), i.sizes());
  }
  Plan p;
  p.call = {Kind::kReduceScatter,
            "reduce_scatter",
            out.scalar_type(),
            {outputs[0].sizes()},
            static_cast<int>(opts.reduceOp.op_),
            -1,
            static_cast<uint64_t>(nbytes(out) * size_)};
  p.type = c10d::OpType::REDUCE_SCATTER;
  p.outputs = outputs;
  std::vector<at::Tensor> parts;
  for (const auto& i : ins) parts.push_back(bytes_of(i));
  p.part = [parts](int peer) { return parts[peer]; };
  const c10d::ReduceOp op = opts.reduceOp;
  p.from_slots = [out, op](const Gathered& g) {
    reduce_ranks(g.stacked(out.scalar_type(), out.numel()), op, out);
  };
  auto gloo = gloo_;
  const int64_t n = size_;
  p.through_gloo = [gloo, out, ins, op, opts]() {
    std::vector<at::Tensor> o{out};
    std::vector<std::vector<at::Tensor>> i{ins};
    c10d::ReduceScatterOptions ro = opts;
    ro.reduceOp = gloo_reduce_op(op);
    return gloo->reduce_scatter(o, i, ro);
  };
  p.after_gloo = [out, op, n]() { finish_reduction(out, op, n); };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(),
              "neuron backend: reduce_scatter_tensor_coalesced needs one output per input");
  std::vector<at::Tensor> ins = views_of(inputs, "reduce_scatter_tensor_coalesced");
  std::vector<at::Tensor> outs = views_of(outputs, "reduce_scatter_tensor_coalesced");
  check_reduce_op(opts.reduceOp, ins[0].scalar_type(), "reduce_scatter_tensor_coalesced");
  Plan p;
  p.call.kind = Kind::kReduceScatter;
  p.call.name = "reduce_scatter_tensor_coalesced";
  p.call.dtype = ins[0].scalar_type();
  p.call.reduce_op = static_cast<int>(opts.reduceOp.op_);
  for (size_t i = 0; i < ins.size(); ++i) {
    TORCH_CHECK(ins[i].scalar_type() == p.call.dtype && outs[i].scalar_type() == p.call.dtype &&
                    ins[i].numel() == outs[i].numel() * size_,
                "neuron backend: reduce_scatter_tensor_coalesced needs tensors of one dtype and "
                "inputs of ",
                size_, " x their output's elements");
    p.call.shapes.push_back(inputs[i].sizes());
  }
  p.call.model_bytes = static_cast<uint64_t>(total_bytes(ins));
  p.type = c10d::OpType::COALESCED;
  p.outputs = outputs;
  // Each peer gets its chunk of every tensor, one after another.
  std::vector<at::Tensor> in_bytes;
  for (const auto& i : ins) in_bytes.push_back(bytes_of(i));
  p.part = [in_bytes, outs](int peer) {
    std::vector<at::Tensor> chunks;
    for (size_t i = 0; i < in_bytes.size(); ++i) {
      chunks.push_back(in_bytes[i].narrow(0, peer * nbytes(outs[i]), nbytes(outs[i])));
    }
    return at::cat(chunks);
  };
  const c10d::ReduceOp op = opts.reduceOp;
  p.from_slots = [outs, op](const Gathered& g) {
    int64_t offset = 0;
    for (const auto& o : outs) {
      reduce_ranks(g.stacked(o.scalar_type(), o.numel(), offset), op, o);
      offset += nbytes(o);
    }
  };
  auto gloo = gloo_;
  const int64_t n = size_;
  p.through_gloo = [gloo, ins, outs, op, opts]() {
    std::vector<at::Tensor> o = outs, i = ins;
    c10d::ReduceScatterOptions ro = opts;
    ro.reduceOp = gloo_reduce_op(op);
    return gloo->reduce_scatter_tensor_coalesced(o, i, ro);
  };
  p.after_gloo = [outs, op, n]() {
    for (const auto& o : outs) finish_reduction(o, op, n);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  const at::Tensor in = view_of(input, "all_to_all_single");
  const at::Tensor out = view_of(output, "all_to_all_single");
  TORCH_CHECK(in.scalar_type() == out.scalar_type(),
              "neuron backend: all_to_all_single needs one dtype, got ", in.scalar_type(), " and ",
              out.scalar_type());
  // Split sizes count rows of dim 0; empty means equal parts.
  auto byte_splits = [&](const at::Tensor& t, const std::vector<int64_t>& rows, const char* what) {
    const int64_t row_bytes = t.dim() == 0 || t.size(0) == 0 ? 0 : nbytes(t) / t.size(0);
    std::vector<int64_t> out_splits(size_);
    if (rows.empty()) {
      TORCH_CHECK(t.dim() > 0 && t.size(0) % size_ == 0, "neuron backend: all_to_all_single's ",
                  what, " has ", t.dim() > 0 ? t.size(0) : 0,
                  " rows, not a multiple of the group's ", size_, " ranks");
      for (auto& s : out_splits) s = t.size(0) / size_ * row_bytes;
    } else {
      TORCH_CHECK(static_cast<int>(rows.size()) == size_, "neuron backend: all_to_all_single's ",
                  what, " split sizes list ", rows.size(), " entries for ", size_, " ranks");
      int64_t sum = 0;
      for (int r = 0; r < size_; ++r) out_splits[r] = rows[r] * row_bytes, sum += rows[r];
      TORCH_CHECK(t.dim() > 0 && sum == t.size(0), "neuron backend: all_to_all_single's ", what,
                  " split sizes add up to ", sum, " rows but the tensor has ",
                  t.dim() > 0 ? t.size(0) : 0);
    }
    return out_splits;
  };
  Plan p;
  p.call.kind = Kind::kAllToAll;
  p.call.name = "all_to_all_single";
  p.call.dtype = in.scalar_type();
  p.call.shapes = {input.sizes()};
  p.call.send_splits = byte_splits(in, input_split_sizes, "input");
  p.call.recv_splits = byte_splits(out, output_split_sizes, "output");
  p.call.model_bytes = static_cast<uint64_t>(nbytes(in));
  p.type = c10d::OpType::ALLTOALL_BASE;
  p.outputs = {output};
  // Each peer gets the rows meant for it.
  const at::Tensor in_bytes = bytes_of(in);
  std::vector<int64_t> starts(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) starts[r + 1] = starts[r] + p.call.send_splits[r];
  p.part = [in_bytes, starts](int peer) {
    return in_bytes.narrow(0, starts[peer], starts[peer + 1] - starts[peer]);
  };
  const int64_t me = rank_;
  const int64_t n = size_;
  p.from_slots = [out, me, n](const Gathered& g) {
    // Rank s sent me its rows for me; how many bytes is in its split sizes.
    const at::Tensor dst = out.view({-1}).view(at::kByte);
    int64_t at_out = 0;
    for (int64_t s = 0; s < n; ++s) {
      const auto* splits = reinterpret_cast<const int64_t*>(
          g.all.data_ptr<uint8_t>() + s * g.layout.slot_bytes() + g.layout.splits_offset());
      const int64_t len = splits[me];
      dst.narrow(0, at_out, len).copy_(g.of(s, at::kByte, len));
      at_out += len;
    }
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, out, output_split_sizes, input_split_sizes, opts]() {
    at::Tensor o = out, i = in;
    std::vector<int64_t> os = output_split_sizes, is = input_split_sizes;
    return gloo->alltoall_base(o, i, os, is, opts);
  };
  return run(p);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions&) {
  Plan p;
  p.call.kind = Kind::kBarrier;
  p.call.name = "barrier";
  p.type = c10d::OpType::BARRIER;
  return run(p);
}

// ---- point to point ----

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
      r.host_advance(sim::SimTime::from_ns(r.device().params().host.kernel_launch_overhead_ns));
      collectives::CollectiveDesc d{Kind::kSendRecv, static_cast<uint64_t>(bytes)};
      d.root = static_cast<uint32_t>(rank_ * opts_.ranks_per_process);
      d.peer = static_cast<uint32_t>(dst_rank * opts_.ranks_per_process);
      const collectives::CollectiveCost cost = model_->cost(d);
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
  const Header h = make_header(call, 0, static_cast<int64_t>(arrival.ps), fits ? bytes : -1);
  at::Tensor slot = at::zeros({layout_.slot_bytes()}, at::kByte);
  std::memcpy(slot.data_ptr(), &h, sizeof(Header));
  if (fits && bytes > 0) {
    std::memcpy(slot.data_ptr<uint8_t>() + layout_.payload_offset(), view.data_ptr(), bytes);
  }
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
          backend_error(fmt::format("{}: {}", context, first_line(std::current_exception()))));
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
    r.host_advance(sim::SimTime::from_ns(r.device().params().host.kernel_launch_overhead_ns));
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
          backend_error(fmt::format("{}: {}", context, first_line(std::current_exception()))));
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
            backend_error(fmt::format("{}: {}", context, first_line(std::current_exception()))));
      }
    }
    const uint64_t bytes = static_cast<uint64_t>(nbytes(view));
    const runtime::CollectiveRecord placed = with_runtime([&](runtime::Runtime& r) {
      collectives::CollectiveDesc d{Kind::kSendRecv, bytes};
      d.root = static_cast<uint32_t>(src_rank * self->opts_.ranks_per_process);
      d.peer = static_cast<uint32_t>(self->rank_ * self->opts_.ranks_per_process);
      const collectives::CollectiveCost cost = self->model_->cost(d);
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
