#pragma once
// One call of an op as the op library reads it: its arguments by schema name, its outputs, and
// what the device offers (core parameters, the grid of a logical core). The eager backend
// implements it over PyTorch's arguments; the rules in this folder never see the framework.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/kernels/ops/scalar_type.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels::ops {

/// A tensor argument or output.
struct TensorArg {
  bool defined = false;
  /// On the device: `desc` describes its memory. A host tensor among device arguments is a
  /// 0-dim scalar (its value is `OpCall::number`) or host-side indices.
  bool on_device = false;
  ScalarType type = ScalarType::kFloat32;
  /// The device's view: HBM address (0 until the launch fills it in), device dtype, sizes, and
  /// strides in device elements (64-bit data as low 32-bit words: strides doubled; complex data
  /// as its real view, a trailing dim of 2).
  TensorDesc desc;
  /// Host-readable memory of the first element (simulated HBM is host memory), for rules whose
  /// programs depend on the data (indices); null where no values exist.
  const void* data = nullptr;

  int64_t dim() const { return desc.dim(); }
  const std::vector<int64_t>& sizes() const { return desc.sizes; }
  /// Size of dim `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  /// Stride of dim `d` in framework elements.
  int64_t stride(int64_t d) const;
  uint64_t numel() const { return desc.numel(); }
  bool is_floating() const { return ops::is_floating(type); }
  bool is_integral(bool include_bool) const { return ops::is_integral(type, include_bool); }
  /// Contiguous as the framework says it: in framework elements (64-bit data counts one element
  /// per value, not two words), and always when empty.
  bool is_contiguous() const;
  /// Elements [start, start + length) of dim `d` (a view: same memory).
  TensorArg narrow(int64_t d, int64_t start, int64_t length) const;
};

/// What kind of value an argument holds.
enum class ArgKind {
  kAbsent,
  kNone,
  kTensor,
  kTensors,
  kInt,
  kInts,
  kFloat,
  kFloats,
  kBool,
  kString
};

class OpCall {
 public:
  virtual ~OpCall() = default;
  /// The op's base name ("aten::add" for add, add_ and add.out).
  virtual const std::string& name() const = 0;
  /// The number of arguments of the overload (for tensor(index)).
  virtual size_t num_args() const = 0;
  /// kAbsent when the overload's schema has no such argument.
  virtual ArgKind kind(std::string_view arg) const = 0;
  /// The argument by schema name, or by position.
  virtual TensorArg tensor(std::string_view arg) const = 0;
  virtual TensorArg tensor(size_t index) const = 0;  // undefined when not a tensor
  /// A Tensor[] / Tensor?[] argument (undefined entries for None).
  virtual std::vector<TensorArg> tensors(std::string_view arg) const = 0;
  /// A number: Scalar, int, float, bool, or a host 0-dim tensor's value; `fallback` when absent
  /// or None.
  virtual double number(std::string_view arg, double fallback) const = 0;
  /// An int (or bool) argument exactly; `fallback` when absent or None.
  virtual int64_t integer(std::string_view arg, int64_t fallback) const = 0;
  /// A Scalar[] / float[] argument.
  virtual std::vector<double> numbers(std::string_view arg) const = 0;
  /// An int[] / SymInt[] argument (concrete sizes).
  virtual std::vector<int64_t> ints(std::string_view arg) const = 0;
  virtual std::string str(std::string_view arg) const = 0;
  /// A ScalarType argument (dtype=, out_dtype=); nullopt when absent or None.
  virtual std::optional<ScalarType> scalar_type(std::string_view arg) const = 0;

  virtual size_t num_outputs() const = 0;
  virtual TensorArg output(size_t i) const = 0;
  /// Ops with a data-dependent output size: one int32 of device memory for the element count.
  virtual TensorArg count() const = 0;

  virtual const device_model::CoreParams& core() const = 0;
  /// Physical cores the launch may span (kernels/spmd.h).
  virtual uint32_t grid() const = 0;

  // Conveniences over the above.
  bool in_schema(std::string_view arg) const { return kind(arg) != ArgKind::kAbsent; }
  /// In the schema and not None.
  bool has(std::string_view arg) const;
  bool boolean(std::string_view arg, bool fallback) const;
  /// A dim argument wrapped into [0, ndim) (ndim 0 counts as 1, as PyTorch's maybe_wrap_dim).
  int64_t dim(std::string_view arg, int64_t ndim) const;
};

}  // namespace neuronsim::kernels::ops
