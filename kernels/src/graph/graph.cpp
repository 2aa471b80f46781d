#include "neuronsim/kernels/graph/graph.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace neuronsim::kernels::graph {

uint64_t TensorMeta::numel() const {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

bool TensorMeta::fusable() const {
  const bool kind = type_name == "float32" || type_name == "bfloat16" || type_name == "float16" ||
                    type_name == "bool";
  return kind && (on_device || host_scalar());
}

bool TensorMeta::host_scalar() const {
  return !on_device && numel() == 1;
}

std::string TensorMeta::to_string() const {
  return fmt::format("{}[{}]", type_name, fmt::join(sizes, ", "));
}

Arg Arg::tensor(int v) {
  Arg a;
  a.kind = Kind::kTensor;
  a.value = v;
  return a;
}
Arg Arg::tensors(std::vector<int> vs) {
  Arg a;
  a.kind = Kind::kTensors;
  a.values = std::move(vs);
  return a;
}
Arg Arg::integer(int64_t v) {
  Arg a;
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}
Arg Arg::integers(std::vector<int64_t> v) {
  Arg a;
  a.kind = Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Arg Arg::number(double v) {
  Arg a;
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}
Arg Arg::numbers(std::vector<double> v) {
  Arg a;
  a.kind = Kind::kFloats;
  a.floats = std::move(v);
  return a;
}
Arg Arg::boolean(bool v) {
  Arg a;
  a.kind = Kind::kBool;
  a.b = v;
  return a;
}
Arg Arg::string(std::string v) {
  Arg a;
  a.kind = Kind::kString;
  a.s = std::move(v);
  return a;
}

double Arg::as_double() const {
  switch (kind) {
    case Kind::kInt:
      return static_cast<double>(i);
    case Kind::kFloat:
      return f;
    case Kind::kBool:
      return b ? 1.0 : 0.0;
    default:
      throw std::invalid_argument("argument is not a number");
  }
}

const Arg* Node::find(const std::string& arg_name) const {
  for (const auto& [n, a] : args) {
    if (n == arg_name) return &a;
  }
  return nullptr;
}

const Arg& Node::arg(const std::string& arg_name) const {
  if (const Arg* a = find(arg_name)) return *a;
  throw std::invalid_argument(fmt::format("{} has no argument '{}'", target(), arg_name));
}

int Graph::add_value(TensorMeta meta, std::string name) {
  Value v;
  v.meta = std::move(meta);
  v.name = std::move(name);
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

int Graph::add_temporary(TensorMeta meta, std::string name) {
  const int id = add_value(std::move(meta), std::move(name));
  values_.back().temporary = true;
  return id;
}

void Graph::add_input(int value) {
  values_.at(static_cast<size_t>(value)).input = true;
  inputs_.push_back(value);
}

void Graph::add_node(Node n) {
  const int index = static_cast<int>(nodes_.size());
  for (int v : n.outputs) {
    if (v >= 0) values_.at(static_cast<size_t>(v)).producer = index;
  }
  nodes_.push_back(std::move(n));
}

void Graph::add_output(int value) {
  values_.at(static_cast<size_t>(value)).output = true;
  outputs_.push_back(value);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size(); d > 1; --d)
    s[d - 2] = s[d - 1] * std::max<int64_t>(sizes[d - 1], 1);
  return s;
}

std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& sizes,
                                                 const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& new_sizes) {
  int64_t numel = 1, new_numel = 1;
  for (int64_t s : sizes) numel *= s;
  for (int64_t s : new_sizes) new_numel *= s;
  if (numel != new_numel) return std::nullopt;
  std::vector<int64_t> out(new_sizes.size(), 1);
  if (sizes.empty()) return out;
  if (numel == 0) return contiguous_strides(new_sizes);
  // torch's computeStride: walk chunks of old dims that are contiguous with each other and
  // match them with runs of new dims of the same element count.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace neuronsim::kernels::graph
