// The collectives of the neuron backend: what each one exchanges, how small data is finished on
// the host and which Gloo collective moves large data. NeuronBackend::run (neuron_backend.cpp)
// does the rest.
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
  p.payload = bytes_at(view);
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
  const int64_t bytes = nbytes(view);
  if (size_ == 2 && bytes > layout_.inline_bytes &&
      bytes <= kFullExchangeSlots * layout_.inline_bytes) {
    // Two ranks, data of a few slots: each rank posts the other its whole tensor and reduces
    // both in rank order (the same result on both). One message each way, where the
    // reduce-scatter + all-gather below waits on the peer twice; each rank reduces the whole
    // tensor, which costs more than that second wait only for larger data.
    const int64_t me = rank_;
    p.from_slots = nullptr;
    p.land_always = true;
    p.scratch_bytes = bytes;
    p.landing = [bytes](int, uint8_t* scratch) { return Landing{scratch, bytes}; };
    p.landed = [view, op, me](uint8_t* scratch, PostedData&, int) {
      // The tensor has been sent (every posted message completed): it may take the result.
      const at::Tensor other = at::from_blob(scratch, {view.numel()}, view.options());
      reduce_two(me == 0 ? view : other, me == 0 ? other : view, op, view);
    };
  } else if (size_ == 2 && bytes > layout_.inline_bytes && bytes <= kPostedAllReduceMax) {
    // Two ranks, data larger than a slot: each rank posts the other the half it reduces
    // (reduce-scatter), reduces its own half and sends it back (all-gather), the bytes and
    // reduction work of Gloo's ring. Each half is reduced once, so both ranks get the same result.
    // Larger data goes through Gloo's ring, which overlaps the reduction with the transfers: at
    // that size the header exchange before it no longer shows.
    const int64_t es = view.element_size();
    const int64_t half0 = view.numel() / 2;
    const int64_t me = rank_, peer = 1 - rank_;
    const int64_t my_start = me == 0 ? 0 : half0, my_len = me == 0 ? half0 : view.numel() - half0;
    const int64_t peer_start = me == 0 ? half0 : 0, peer_len = view.numel() - my_len;
    auto* base = static_cast<uint8_t*>(view.data_ptr());
    p.payload = Bytes{};
    p.part = [base, es, peer, peer_start, peer_len](int r) {
      return r == peer ? Bytes{base + peer_start * es, peer_len * es, at::Tensor()} : Bytes{};
    };
    p.from_slots = nullptr;
    p.land_always = true;
    p.scratch_bytes = my_len * es;
    p.landing = [my_len, es](int, uint8_t* scratch) { return Landing{scratch, my_len * es}; };
    p.landed = [view, op, base, es, me, peer, my_start, my_len, peer_start, peer_len](
                   uint8_t* scratch, PostedData& next, int next_tag) {
      // This rank's half of the input has been sent: the peer's reduced half may land there.
      next.post_recv(static_cast<int>(peer), base + peer_start * es, peer_len * es, next_tag);
      const at::Tensor own = at::from_blob(base + my_start * es, {my_len}, view.options());
      const at::Tensor other = at::from_blob(scratch, {my_len}, view.options());
      reduce_two(me == 0 ? own : other, me == 0 ? other : own, op, own);
      next.post_send(static_cast<int>(peer), base + my_start * es, my_len * es, next_tag);
      next.wait_all();
    };
  }
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
  const bool is_root = rank_ == root;
  if (is_root) p.payload = bytes_at(view);  // the others send their header only
  p.from_slots = [view, root, is_root](const Gathered& g) {
    if (!is_root) std::memcpy(view.data_ptr(), g.data(root), nbytes(view));
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
  const Bytes data = bytes_at(view);
  p.part = [data, root](int peer) { return peer == root ? data : Bytes{}; };
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
  p.payload = bytes_at(in);
  p.from_slots = [in, out](const Gathered& g) {
    const int64_t chunk = nbytes(in);
    auto* dst = static_cast<uint8_t*>(out.data_ptr());
    for (int64_t r = 0; r < g.layout.ranks; ++r) std::memcpy(dst + r * chunk, g.data(r), chunk);
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, out, opts]() {
    at::Tensor o = out, i = in;
    return gloo->_allgather_base(o, i, opts);
  };
  const int64_t chunk = nbytes(in);
  std::vector<uint8_t*> regions;
  for (int r = 0; r < size_; ++r)
    regions.push_back(static_cast<uint8_t*>(out.data_ptr()) + r * chunk);
  land_gathered(p, in, regions, chunk);
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
  p.payload = bytes_at(in);
  p.from_slots = [in, outs](const Gathered& g) {
    for (size_t r = 0; r < outs.size(); ++r) {
      std::memcpy(outs[r].data_ptr(), g.data(static_cast<int64_t>(r)), nbytes(in));
    }
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, outs, opts]() {
    std::vector<std::vector<at::Tensor>> o{outs};
    std::vector<at::Tensor> i{in};
    return gloo->allgather(o, i, opts);
  };
  std::vector<uint8_t*> regions;
  for (const auto& o : outs) regions.push_back(static_cast<uint8_t*>(o.data_ptr()));
  land_gathered(p, in, regions, nbytes(in));
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
  p.payload = ins.size() == 1 ? bytes_at(ins[0]) : bytes_owned(concat_bytes(ins));
  p.from_slots = [ins, outs](const Gathered& g) {
    int64_t offset = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const int64_t chunk = nbytes(ins[i]);
      auto* dst = static_cast<uint8_t*>(outs[i].data_ptr());
      for (int64_t r = 0; r < g.layout.ranks; ++r) {
        std::memcpy(dst + r * chunk, g.data(r) + offset, chunk);
      }
      offset += chunk;
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
  const Bytes data = bytes_at(in);
  p.part = [data, root](int peer) { return peer == root ? data : Bytes{}; };
  p.from_slots = [in, outs](const Gathered& g) {
    for (size_t r = 0; r < outs.size(); ++r) {
      std::memcpy(outs[r].data_ptr(), g.data(static_cast<int64_t>(r)), nbytes(in));
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
  std::vector<Bytes> parts;
  for (const auto& i : ins) parts.push_back(bytes_at(i));
  p.part = [parts](int peer) { return parts.empty() ? Bytes{} : parts[peer]; };
  p.from_slots = [out, root](const Gathered& g) {
    std::memcpy(out.data_ptr(), g.data(root), nbytes(out));
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
  const Bytes in_bytes = bytes_at(in);
  const int64_t chunk = nbytes(out);
  p.part = [in_bytes, chunk](int peer) {
    return Bytes{in_bytes.data + peer * chunk, chunk, at::Tensor()};
  };
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
  const int64_t me = rank_;
  land_reduced_chunks(p, out, op, [in_bytes, chunk, me]() {
    return const_cast<uint8_t*>(in_bytes.data) + me * chunk;
  });
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
  std::vector<Bytes> parts;
  for (const auto& i : ins) parts.push_back(bytes_at(i));
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
  const at::Tensor own = ins[rank_];
  land_reduced_chunks(p, out, op, [own]() { return static_cast<uint8_t*>(own.data_ptr()); });
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
    return bytes_owned(at::cat(chunks));
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
  const Bytes in_bytes = bytes_at(in);
  std::vector<int64_t> starts(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) starts[r + 1] = starts[r] + p.call.send_splits[r];
  p.part = [in_bytes, starts](int peer) {
    return Bytes{in_bytes.data + starts[peer], starts[peer + 1] - starts[peer], at::Tensor()};
  };
  // This rank's own rows go from its input to its output directly, unless they overlap (an
  // in-place all_to_all: earlier ranks' rows could overwrite them before they are read).
  const auto* out_start = static_cast<const uint8_t*>(out.const_data_ptr());
  p.own_part_direct =
      in_bytes.data + in_bytes.size <= out_start || out_start + nbytes(out) <= in_bytes.data;
  const bool direct = p.own_part_direct;
  const int64_t me = rank_;
  const int64_t n = size_;
  const int64_t own_start = starts[me];
  p.from_slots = [in_bytes, out, me, n, own_start, direct](const Gathered& g) {
    // Rank s sent me its rows for me; how many bytes is in its split sizes (checked equal to
    // what this rank expects).
    auto* dst = static_cast<uint8_t*>(out.data_ptr());
    for (int64_t s = 0; s < n; ++s) {
      const auto* splits = reinterpret_cast<const int64_t*>(
          g.all.const_data_ptr<uint8_t>() + s * g.layout.slot_bytes() + g.layout.splits_offset());
      const int64_t len = splits[me];
      if (len > 0) std::memcpy(dst, s == me && direct ? in_bytes.data + own_start : g.data(s), len);
      dst += len;
    }
  };
  auto gloo = gloo_;
  p.through_gloo = [gloo, in, out, output_split_sizes, input_split_sizes, opts]() {
    at::Tensor o = out, i = in;
    std::vector<int64_t> os = output_split_sizes, is = input_split_sizes;
    return gloo->alltoall_base(o, i, os, is, opts);
  };
  // Peers' rows land in the output, or in scratch when the output overlaps the input (which is
  // still being sent) and are copied after this rank's own rows.
  std::vector<int64_t> recv_at(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) recv_at[r + 1] = recv_at[r] + p.call.recv_splits[r];
  auto* out_base = static_cast<uint8_t*>(out.data_ptr());
  if (!direct) p.scratch_bytes = nbytes(out);
  p.landing = [out_base, recv_at, direct](int peer, uint8_t* scratch) {
    return Landing{(direct ? out_base : scratch) + recv_at[peer],
                   recv_at[peer + 1] - recv_at[peer]};
  };
  p.landed = [out_base, recv_at, in_bytes, own_start, me, n, direct](uint8_t* scratch, PostedData&,
                                                                     int) {
    const int64_t len = recv_at[me + 1] - recv_at[me];
    if (len > 0) std::memmove(out_base + recv_at[me], in_bytes.data + own_start, len);
    for (int64_t r = 0; r < n && !direct; ++r) {
      const int64_t peer_len = recv_at[r + 1] - recv_at[r];
      if (r != me && peer_len > 0) {
        std::memcpy(out_base + recv_at[r], scratch + recv_at[r], peer_len);
      }
    }
  };
  return run(p);
}

void NeuronBackend::land_gathered(Plan& p, const at::Tensor& in,
                                  const std::vector<uint8_t*>& regions, int64_t chunk) const {
  // Peers' data lands in the output regions, unless the input (still being sent) overlaps one
  // of the others': then in scratch, copied after this rank's own chunk.
  const int me = rank_;
  bool clash = false;
  for (int r = 0; r < size_; ++r) {
    clash = clash || (r != me && overlaps(in.const_data_ptr(), chunk, regions[r], chunk));
  }
  if (clash) p.scratch_bytes = chunk * size_;
  p.landing = [regions, chunk, clash](int peer, uint8_t* scratch) {
    return Landing{clash ? scratch + peer * chunk : regions[peer], chunk};
  };
  p.landed = [in, regions, chunk, me, clash](uint8_t* scratch, PostedData&, int) {
    if (chunk <= 0) return;
    std::memmove(regions[me], in.const_data_ptr(), chunk);
    for (size_t r = 0; r < regions.size() && clash; ++r) {
      if (static_cast<int>(r) != me) std::memcpy(regions[r], scratch + r * chunk, chunk);
    }
  };
}

void NeuronBackend::land_reduced_chunks(Plan& p, const at::Tensor& out, const c10d::ReduceOp& op,
                                        std::function<uint8_t*()> own_chunk) const {
  // Each peer's chunk for this rank lands in a scratch row; the rows reduce in rank order.
  const int64_t chunk = nbytes(out);
  const int64_t n = size_, me = rank_;
  if (n == 2) {
    // This rank's own chunk is reduced where it is: no row of its own.
    p.scratch_bytes = chunk;
    p.landing = [chunk](int, uint8_t* scratch) { return Landing{scratch, chunk}; };
    p.landed = [out, op, me, own_chunk](uint8_t* scratch, PostedData&, int) {
      const at::Tensor peer = at::from_blob(scratch, {out.numel()}, out.options());
      const at::Tensor own = at::from_blob(own_chunk(), {out.numel()}, out.options());
      reduce_two(me == 0 ? own : peer, me == 0 ? peer : own, op, out);
    };
    return;
  }
  p.scratch_bytes = chunk * n;
  p.landing = [chunk](int peer, uint8_t* scratch) {
    return Landing{scratch + peer * chunk, chunk};
  };
  p.landed = [out, op, me, n, own_chunk, chunk](uint8_t* scratch, PostedData&, int) {
    std::memcpy(scratch + me * chunk, own_chunk(), chunk);
    reduce_ranks(at::from_blob(scratch, {n, out.numel()}, out.options()), op, out);
  };
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions&) {
  Plan p;
  p.call.kind = Kind::kBarrier;
  p.call.name = "barrier";
  p.type = c10d::OpType::BARRIER;
  return run(p);
}

}  // namespace neuronsim::backend::distributed
