#include "neuronsim/kernels/ops/op_call.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::kernels::ops {
namespace {

int64_t wrap(int64_t d, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n) {
    throw std::out_of_range(
        fmt::format("dimension {} out of range (expected to be in [{}, {}])", d, -n, n - 1));
  }
  return d < 0 ? d + n : d;
}

}  // namespace

int64_t TensorArg::size(int64_t d) const {
  return desc.sizes.at(static_cast<size_t>(wrap(d, dim())));
}

int64_t TensorArg::stride(int64_t d) const {
  const int64_t s = desc.strides.at(static_cast<size_t>(wrap(d, dim())));
  return is_64bit(type) ? s / 2 : s;
}

bool TensorArg::is_contiguous() const {
  if (numel() == 0) return true;
  if (!is_64bit(type)) return desc.contiguous();
  TensorDesc words = desc;  // strides in framework elements: one per value, not two words
  for (int64_t& s : words.strides) s /= 2;
  return words.contiguous();
}

TensorArg TensorArg::narrow(int64_t d, int64_t start, int64_t length) const {
  TensorArg t = *this;
  const size_t i = static_cast<size_t>(wrap(d, dim()));
  const uint64_t bytes =
      static_cast<uint64_t>(start * desc.strides[i]) * device_model::dtype_size(desc.dtype);
  t.desc.address += bytes;
  t.desc.sizes[i] = length;
  if (data) {
    const int64_t framework_bytes = start * stride(d) * element_size(type);
    t.data = static_cast<const char*>(data) + framework_bytes;
  }
  return t;
}

bool OpCall::has(std::string_view arg) const {
  const ArgKind k = kind(arg);
  return k != ArgKind::kAbsent && k != ArgKind::kNone;
}

bool OpCall::boolean(std::string_view arg, bool fallback) const {
  return number(arg, fallback ? 1.0 : 0.0) != 0.0;
}

int64_t OpCall::dim(std::string_view arg, int64_t ndim) const {
  return wrap(integer(arg, 0), ndim);
}

}  // namespace neuronsim::kernels::ops
