#pragma once
// A captured framework graph as the graph compiler sees it: tensors (values) with their layout,
// and ATen calls (nodes) by name with their schema-named arguments. Torch-free: the framework
// side (python/neuronsim/torch_compile) describes each FX node in these terms.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/device_model/dtype.h"

namespace neuronsim::kernels::graph {

/// The layout of a tensor value (sizes and strides in elements, from the graph's metadata).
struct TensorMeta {
  device_model::DType dtype = device_model::DType::kFp32;
  /// The framework's name for the dtype ("float32", "bfloat16", "bool", "int64", ...).
  std::string type_name = "float32";
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;  // elements into its storage
  /// On the device (a CPU tensor in a device graph is a constant the compiler leaves alone).
  bool on_device = true;

  uint64_t numel() const;
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  /// Floating point or bool: what fused programs compute (in fp32 on the engines). Integer data
  /// needs exact 32/64-bit arithmetic and runs with the library's kernels instead.
  bool fusable() const;
  /// A one-element CPU tensor (an optimizer's step count): its value is staged to the device
  /// with the launch that reads it, like a kernel argument.
  bool host_scalar() const;
  bool is_bool() const { return type_name == "bool"; }
  std::string to_string() const;
};

/// One argument of an ATen call.
struct Arg {
  enum class Kind { kNone, kTensor, kTensors, kInt, kInts, kFloat, kFloats, kBool, kString };
  Kind kind = Kind::kNone;
  int value = -1;           // kTensor: value id
  std::vector<int> values;  // kTensors: value ids (-1 for None entries)
  int64_t i = 0;
  std::vector<int64_t> ints;
  double f = 0.0;
  std::vector<double> floats;  // kFloats (a list of scalars)
  bool b = false;
  std::string s;

  static Arg none() { return {}; }
  static Arg tensor(int v);
  static Arg tensors(std::vector<int> vs);
  static Arg integer(int64_t v);
  static Arg integers(std::vector<int64_t> v);
  static Arg number(double v);
  static Arg numbers(std::vector<double> v);
  static Arg boolean(bool v);
  static Arg string(std::string v);
  bool is_none() const { return kind == Kind::kNone; }
  /// Int, float or bool as a double.
  double as_double() const;
};

/// An ATen call: "aten::addmm" with overload "default", its arguments by schema name.
struct Node {
  std::string name;  // the FX node's name ("addmm_2")
  std::string op;    // "aten::addmm"
  std::string overload;
  std::vector<std::pair<std::string, Arg>> args;
  std::vector<int> outputs;  // value ids of the returned tensors (-1: not a tensor / unused)
  /// The eager backend has a device kernel for this op (otherwise it runs on the host CPU).
  bool device_kernel = false;

  const Arg* find(const std::string& arg_name) const;
  /// The argument (throws std::invalid_argument when the schema has no such argument).
  const Arg& arg(const std::string& arg_name) const;
  std::string target() const { return op + "." + overload; }
};

struct Value {
  TensorMeta meta;
  std::string name;
  int producer = -1;  // node index; -1 for graph inputs and temporaries
  bool input = false, output = false;
  /// Created by the compiler for an intermediate of a composite op: no framework tensor holds
  /// it, so it must stay on chip (never stored to HBM).
  bool temporary = false;
};

class Graph {
 public:
  int add_value(TensorMeta meta, std::string name);
  void add_input(int value);
  /// Appends a node (in the graph's topological order) and records it as its outputs' producer.
  void add_node(Node n);
  void add_output(int value);
  /// A compiler temporary (see Value::temporary).
  int add_temporary(TensorMeta meta, std::string name);

  const std::vector<Value>& values() const { return values_; }
  Value& value(int id) { return values_.at(static_cast<size_t>(id)); }
  const Value& value(int id) const { return values_.at(static_cast<size_t>(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_, outputs_;
};

/// Contiguous (row-major) strides of `sizes`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

/// The strides a view of `sizes`/`strides` reshaped to `new_sizes` has, when the reshape is a
/// view (as torch's computeStride); nullopt when it is not (or the element counts differ).
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& sizes,
                                                 const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& new_sizes);

}  // namespace neuronsim::kernels::graph
