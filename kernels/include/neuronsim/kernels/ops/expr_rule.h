#pragma once
// Elementwise ops as expressions: one rule per op turns its arguments into the kernel library's
// Expr. The same rule is the op's eager program (build_elementwise over its device tensors) and
// its part of a fused region in a compiled graph (the graph compiler's pointwise op), so an op
// with an expression rule runs natively in eager mode and fuses under torch.compile.
#include <functional>
#include <string>
#include <string_view>

#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/ops/scalar_type.h"

namespace neuronsim::kernels::ops {

/// What an expression rule reads of its op's arguments, whoever calls it.
class ExprOperands {
 public:
  virtual ~ExprOperands() = default;
  /// The argument as an operand: a device tensor becomes an input of the expression, a number
  /// (or a host scalar tensor) a constant. Throws std::invalid_argument when the caller cannot
  /// take it (the graph compiler keeps the node whole then).
  virtual Arg get(std::string_view name) = 0;
  /// In the schema and not None.
  virtual bool has(std::string_view name) const = 0;
  /// A device tensor (a host scalar tensor is a number).
  virtual bool is_tensor(std::string_view name) const = 0;
  virtual double num(std::string_view name, double fallback) const = 0;
  virtual std::string str(std::string_view name) const = 0;
  /// The element type of a tensor argument (kOther for a non-tensor).
  virtual ScalarType type(std::string_view name) const = 0;
  /// The element type of the result.
  virtual ScalarType out_type() const = 0;

  /// The element width in bits of the result (shifts clamp their amount to it).
  int out_bits() const { return 8 * element_size(out_type()); }
};

struct ExprRule {
  /// Appends the op's steps to `e`; the returned Arg is the result.
  std::function<Arg(ExprOperands&, Expr&)> build;
  /// Whether the rule handles these arguments (null: always); else the CPU fallback (eager) or
  /// the node stays whole (compiled graph).
  std::function<bool(const ExprOperands&)> supports;
};

}  // namespace neuronsim::kernels::ops
