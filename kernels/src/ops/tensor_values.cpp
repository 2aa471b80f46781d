#include "neuronsim/kernels/ops/tensor_values.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/device_model/dtype.h"

namespace neuronsim::kernels::ops {
namespace {

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double element(const char* p, ScalarType t) {
  switch (t) {
    case ScalarType::kBool:
    case ScalarType::kUInt8:
      return load<uint8_t>(p);
    case ScalarType::kInt8:
      return load<int8_t>(p);
    case ScalarType::kInt16:
      return load<int16_t>(p);
    case ScalarType::kInt32:
      return load<int32_t>(p);
    case ScalarType::kInt64:
      return static_cast<double>(load<int64_t>(p));
    case ScalarType::kFloat16:
      return device_model::fp16_bits_to_float(load<uint16_t>(p));
    case ScalarType::kBFloat16:
      return device_model::bf16_bits_to_float(load<uint16_t>(p));
    case ScalarType::kFloat32:
      return load<float>(p);
    case ScalarType::kFloat64:
      return load<double>(p);
    case ScalarType::kFloat8E4M3:
      return device_model::fp8_e4m3_bits_to_float(load<uint8_t>(p));
    case ScalarType::kFloat8E5M2:
      return device_model::fp8_e5m2_bits_to_float(load<uint8_t>(p));
    default:
      throw std::invalid_argument(fmt::format("cannot read {} values", type_name(t)));
  }
}

// Calls fn(element pointer) for every element in row-major order.
template <typename Fn>
void for_each_element(const TensorArg& t, Fn&& fn) {
  if (t.numel() == 0) return;
  if (!t.data) {
    throw ValuesRequired(
        "its device program depends on tensor values (indices, counts), known only when it runs");
  }
  const int64_t es = element_size(t.type);
  const int64_t nd = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  const char* base = static_cast<const char*>(t.data);
  for (uint64_t n = 0; n < t.numel(); ++n) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[static_cast<size_t>(d)] * t.stride(d);
    fn(base + off * es);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.size(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    s[static_cast<size_t>(d)] = s[static_cast<size_t>(d) + 1] * sizes[static_cast<size_t>(d) + 1];
  return s;
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Row-major coordinates of flat index `i` in `sizes`.
std::vector<int64_t> coords(int64_t i, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> c(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    const int64_t s = sizes[static_cast<size_t>(d)];
    c[static_cast<size_t>(d)] = s ? i % s : 0;
    i = s ? i / s : 0;
  }
  return c;
}

int64_t wrap_index(int64_t i, int64_t size, int64_t dim) {
  if (i < -size || i >= size) {
    throw std::out_of_range(
        fmt::format("index {} is out of bounds for dimension {} with size {}", i, dim, size));
  }
  return i < 0 ? i + size : i;
}

// The broadcast of two shapes (right-aligned).
std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) {
      throw std::invalid_argument("shape mismatch: indexing tensors could not be broadcast");
    }
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

// Element of row-major `values` (of `sizes`) at the broadcast coordinates `c` of `to`.
int64_t broadcast_at(const std::vector<int64_t>& values, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& c, size_t first) {
  int64_t off = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    const size_t cd = first + static_cast<size_t>(d);
    const int64_t s = sizes[static_cast<size_t>(d)];
    if (s != 1) off += c.at(cd) * stride;
    stride *= s;
  }
  return values.at(static_cast<size_t>(off));
}

}  // namespace

std::vector<int64_t> read_integers(const TensorArg& t) {
  std::vector<int64_t> out;
  out.reserve(t.numel());
  for_each_element(t, [&](const char* p) {
    out.push_back(t.type == ScalarType::kInt64 ? load<int64_t>(p)
                                               : static_cast<int64_t>(element(p, t.type)));
  });
  return out;
}

std::vector<double> read_doubles(const TensorArg& t) {
  std::vector<double> out;
  out.reserve(t.numel());
  for_each_element(t, [&](const char* p) { out.push_back(element(p, t.type)); });
  return out;
}

Positions Positions::of(const std::vector<int64_t>& sizes) {
  Positions p;
  p.sizes = sizes;
  p.values.resize(static_cast<size_t>(numel_of(sizes)));
  for (size_t i = 0; i < p.values.size(); ++i) p.values[i] = static_cast<int64_t>(i);
  return p;
}

Positions Positions::index_select(int64_t dim, const std::vector<int64_t>& index) const {
  Positions out;
  out.sizes = sizes.empty() ? std::vector<int64_t>{} : sizes;
  const bool scalar = sizes.empty();
  if (!scalar) out.sizes[static_cast<size_t>(dim)] = static_cast<int64_t>(index.size());
  const std::vector<int64_t> in_strides = strides_of(sizes);
  const int64_t n = numel_of(out.sizes) * (scalar ? static_cast<int64_t>(index.size()) : 1);
  if (scalar) out.sizes = {static_cast<int64_t>(index.size())};
  out.values.resize(static_cast<size_t>(numel_of(out.sizes)));
  for (int64_t i = 0; i < n && !scalar; ++i) {
    std::vector<int64_t> c = coords(i, out.sizes);
    const size_t d = static_cast<size_t>(dim);
    c[d] = wrap_index(index.at(static_cast<size_t>(c[d])), sizes[d], dim);
    int64_t off = 0;
    for (size_t k = 0; k < c.size(); ++k) off += c[k] * in_strides[k];
    out.values[static_cast<size_t>(i)] = values.at(static_cast<size_t>(off));
  }
  if (scalar) {
    for (size_t j = 0; j < index.size(); ++j) {
      wrap_index(index[j], 1, 0);
      out.values[j] = values.at(0);
    }
  }
  return out;
}

Positions Positions::gather(int64_t dim, const std::vector<int64_t>& index_sizes,
                            const std::vector<int64_t>& index) const {
  Positions out;
  out.sizes = index_sizes;
  out.values.resize(index.size());
  if (sizes.empty()) {  // a 0-d input: every index must be 0
    for (size_t i = 0; i < index.size(); ++i)
      out.values[i] = values.at(static_cast<size_t>(wrap_index(index[i], 1, 0)));
    return out;
  }
  const std::vector<int64_t> in_strides = strides_of(sizes);
  for (size_t i = 0; i < index.size(); ++i) {
    std::vector<int64_t> c = coords(static_cast<int64_t>(i), index_sizes);
    const size_t d = static_cast<size_t>(dim);
    c[d] = wrap_index(index[i], sizes[d], dim);
    int64_t off = 0;
    for (size_t k = 0; k < c.size(); ++k) off += c[k] * in_strides[k];
    out.values[i] = values.at(static_cast<size_t>(off));
  }
  return out;
}

Positions Positions::leading(const std::vector<int64_t>& window) const {
  Positions out;
  out.sizes = window;
  const int64_t n = numel_of(window);
  out.values.resize(static_cast<size_t>(n));
  const std::vector<int64_t> in_strides = strides_of(sizes);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> c = coords(i, window);
    int64_t off = 0;
    for (size_t k = 0; k < c.size(); ++k) off += c[k] * in_strides[k];
    out.values[static_cast<size_t>(i)] = values.at(static_cast<size_t>(off));
  }
  return out;
}

Positions Positions::index(const std::vector<Index>& indices) const {
  if (indices.size() > sizes.size()) {
    throw std::out_of_range(fmt::format("too many indices for tensor of dimension {} (got {})",
                                        sizes.size(), indices.size()));
  }
  std::vector<int64_t> bsizes;
  std::vector<size_t> indexed;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i].defined) continue;
    bsizes = indexed.empty() ? indices[i].sizes : broadcast(bsizes, indices[i].sizes);
    indexed.push_back(i);
  }
  if (indexed.empty()) return *this;
  const bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  // The result's dims: (before, B, after) when the indexed dims are adjacent, else (B, rest).
  std::vector<int64_t> out_sizes;
  std::vector<int> source;  // per result dim: the input dim it walks, or -1 for a B dim
  const size_t b_at = adjacent ? indexed.front() : 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (d == b_at) {
      for (int64_t s : bsizes) {
        out_sizes.push_back(s);
        source.push_back(-1);
      }
    }
    const bool is_indexed = d < indices.size() && indices[d].defined;
    if (!is_indexed) {
      out_sizes.push_back(sizes[d]);
      source.push_back(static_cast<int>(d));
    }
  }
  size_t b_first = 0;
  while (b_first < source.size() && source[b_first] != -1) ++b_first;
  const std::vector<int64_t> in_strides = strides_of(sizes);
  Positions out;
  out.sizes = out_sizes;
  const int64_t n = numel_of(out_sizes);
  out.values.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> c = coords(i, out_sizes);
    int64_t off = 0;
    for (size_t r = 0; r < source.size(); ++r) {
      if (source[r] >= 0) off += c[r] * in_strides[static_cast<size_t>(source[r])];
    }
    for (size_t d : indexed) {
      const Index& ix = indices[d];
      // The index tensor's element at the B coordinates, right-aligned within B.
      const size_t first = b_first + (bsizes.size() - ix.sizes.size());
      const int64_t v = broadcast_at(ix.values, ix.sizes, c, first);
      off += wrap_index(v, sizes[d], static_cast<int64_t>(d)) * in_strides[d];
    }
    out.values[static_cast<size_t>(i)] = values.at(static_cast<size_t>(off));
  }
  return out;
}

Positions Positions::expand(const std::vector<int64_t>& to) const {
  Positions out;
  out.sizes = to;
  const int64_t n = numel_of(to);
  out.values.resize(static_cast<size_t>(n));
  const size_t lead = to.size() - sizes.size();
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> c = coords(i, to);
    out.values[static_cast<size_t>(i)] = broadcast_at(values, sizes, c, lead);
  }
  return out;
}

}  // namespace neuronsim::kernels::ops
