#include "distributed/host_ops.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "aten/device_tensor.h"

namespace neuronsim::backend::distributed {

const uint8_t* Gathered::data(int64_t rank) const {
  return all.const_data_ptr<uint8_t>() + rank * layout.slot_bytes() + layout.payload_offset();
}

// Views over the slots are made with from_blob rather than view ops: no dispatcher round trip
// (and no op observer) for each, which the small collectives' host time notices.
at::Tensor Gathered::stacked(at::ScalarType dtype, int64_t numel, int64_t byte_offset) const {
  const int64_t es = static_cast<int64_t>(c10::elementSize(dtype));
  TORCH_INTERNAL_ASSERT(layout.slot_bytes() % es == 0 && byte_offset % es == 0);
  return at::from_blob(const_cast<uint8_t*>(data(0)) + byte_offset, {layout.ranks, numel},
                       {layout.slot_bytes() / es, 1}, at::TensorOptions().dtype(dtype));
}

at::Tensor Gathered::of(int64_t rank, at::ScalarType dtype, int64_t numel,
                        int64_t byte_offset) const {
  return at::from_blob(const_cast<uint8_t*>(data(rank)) + byte_offset, {numel},
                       at::TensorOptions().dtype(dtype));
}

Bytes bytes_at(const at::Tensor& cpu) {
  TORCH_INTERNAL_ASSERT(cpu.is_contiguous());
  return Bytes{static_cast<const uint8_t*>(cpu.const_data_ptr()), nbytes(cpu), at::Tensor()};
}

Bytes bytes_owned(at::Tensor cpu) {
  Bytes b = bytes_at(cpu);
  b.keep = std::move(cpu);
  return b;
}

namespace {
double premul_factor(const c10d::ReduceOp& op) {
  const auto* s = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s, "neuron backend: ReduceOp.PREMUL_SUM without its factor");
  if (!s->tensor_factor.defined()) return s->double_factor;
  const at::Tensor f =
      s->tensor_factor.device().is_cpu() ? s->tensor_factor : cpu_view(s->tensor_factor);
  return f.item<double>();
}
}  // namespace

void reduce_ranks(const at::Tensor& stacked, const c10d::ReduceOp& op, at::Tensor out) {
  const int64_t n = stacked.size(0);
  if (n == 2) {
    // One elementwise op: a third of sum_out's time over dim 0 (1 MiB of float32: 38 against
    // 109 us), in the same rank order.
    reduce_two(stacked[0], stacked[1], op, out);
    return;
  }
  at::Tensor flat = at::from_blob(out.data_ptr(), {out.numel()}, out.options());
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      at::sum_out(flat, stacked, {0}, false, stacked.scalar_type());
      if (op.op_ == c10d::ReduceOp::AVG) flat.div_(n);
      if (op.op_ == c10d::ReduceOp::PREMUL_SUM) flat.mul_(premul_factor(op));
      return;
    case c10d::ReduceOp::PRODUCT:
      at::prod_out(flat, stacked, 0, false, stacked.scalar_type());
      return;
    case c10d::ReduceOp::MIN:
      at::amin_out(flat, stacked, {0});
      return;
    case c10d::ReduceOp::MAX:
      at::amax_out(flat, stacked, {0});
      return;
    default:
      TORCH_CHECK(false, "neuron backend: unsupported reduce op");
  }
}

void reduce_two(const at::Tensor& first, const at::Tensor& second, const c10d::ReduceOp& op,
                at::Tensor out) {
  auto flat = [](const at::Tensor& t) {
    return at::from_blob(const_cast<void*>(t.const_data_ptr()), {t.numel()}, t.options());
  };
  at::Tensor o = flat(out), a = flat(first), b = flat(second);
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      at::add_out(o, a, b);
      if (op.op_ == c10d::ReduceOp::AVG) o.div_(2);
      if (op.op_ == c10d::ReduceOp::PREMUL_SUM) o.mul_(premul_factor(op));
      return;
    case c10d::ReduceOp::PRODUCT:
      at::mul_out(o, a, b);
      return;
    case c10d::ReduceOp::MIN:
      at::minimum_out(o, a, b);
      return;
    case c10d::ReduceOp::MAX:
      at::maximum_out(o, a, b);
      return;
    default:
      TORCH_CHECK(false, "neuron backend: unsupported reduce op");
  }
}

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto* pa = static_cast<const uint8_t*>(a);
  const auto* pb = static_cast<const uint8_t*>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

c10d::ReduceOp gloo_reduce_op(const c10d::ReduceOp& op) {
  if (op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  return op;
}

void finish_reduction(at::Tensor t, const c10d::ReduceOp& op, int64_t ranks) {
  if (op.op_ == c10d::ReduceOp::AVG) t.div_(ranks);
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) t.mul_(premul_factor(op));
}

void check_reduce_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* collective) {
  static const char* names[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  const int code = static_cast<int>(op.op_);
  const char* name = code >= 0 && code < 9 ? names[code] : "UNUSED";
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      return;
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(at::isFloatingType(dtype), "neuron backend: ", collective, " with ReduceOp.",
                  name, " needs a floating-point tensor, got ", dtype);
      return;
    default:
      TORCH_CHECK(false, "neuron backend: ", collective, " with ReduceOp.", name,
                  " is not supported; the neuron backend reduces with SUM, AVG, PRODUCT, MIN, "
                  "MAX and PREMUL_SUM");
  }
}

at::Tensor bytes_of(const at::Tensor& cpu) {
  return cpu.contiguous().view({-1}).view(at::kByte);
}

at::Tensor concat_bytes(const std::vector<at::Tensor>& cpu) {
  std::vector<at::Tensor> parts;
  for (const auto& t : cpu) parts.push_back(bytes_of(t));
  return parts.size() == 1 ? parts.front() : at::cat(parts);
}

int64_t nbytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

int64_t total_bytes(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += nbytes(t);
  return n;
}

}  // namespace neuronsim::backend::distributed
