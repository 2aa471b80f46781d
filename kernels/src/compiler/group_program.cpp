#include "neuronsim/kernels/compiler/group_program.h"

#include "neuronsim/kernels/multi_tensor.h"

namespace neuronsim::kernels::compiler {

using namespace device_model;

namespace {

using Kind = TileInstr::Kind;

// The expression of one region (every member has the same one) and, per operand, whether it is a
// group tensor, output, scalar or scalar output and at which index.
struct Translation {
  MtExpr expr;
  enum class Role { kUnused, kTensor, kOutput, kScalar, kScalarOutput };
  std::vector<Role> role;
  std::vector<int> index;
};

std::optional<Translation> translate(const TileProgramSpec& spec) {
  Translation t;
  t.role.assign(spec.operands.size(), Translation::Role::kUnused);
  t.index.assign(spec.operands.size(), -1);
  int tensors = 0, outputs = 0, scalars = 0, scalar_outputs = 0;
  std::vector<MtArg> value(spec.instrs.size());
  std::vector<bool> per_element(spec.instrs.size(), false);
  auto arg = [&](const kernels::Arg& a) -> std::optional<MtArg> {
    if (a.kind == kernels::Arg::kImm) return MtArg::constant(a.imm);
    if (a.kind != kernels::Arg::kStep || a.index < 0 ||
        static_cast<size_t>(a.index) >= value.size())
      return std::nullopt;
    return value[static_cast<size_t>(a.index)];
  };
  auto is_elem = [&](const kernels::Arg& a) {
    return a.kind == kernels::Arg::kStep && per_element.at(static_cast<size_t>(a.index));
  };
  for (size_t i = 0; i < spec.instrs.size(); ++i) {
    const TileInstr& in = spec.instrs[i];
    switch (in.kind) {
      case Kind::kLoad: {
        const auto k = static_cast<size_t>(in.operand);
        if (k >= spec.operands.size() || t.role[k] != Translation::Role::kUnused)
          return std::nullopt;
        if (in.space == Space::kFull) {
          t.role[k] = Translation::Role::kTensor;
          t.index[k] = tensors;
          value[i] = MtArg::tensor(tensors++);
          per_element[i] = true;
        } else if (in.space == Space::kScalar) {
          t.role[k] = Translation::Role::kScalar;
          t.index[k] = scalars;
          value[i] = MtArg::scalar(scalars++);
        } else {
          return std::nullopt;
        }
        break;
      }
      case Kind::kStep: {
        const Step& s = in.step;
        const auto a = arg(s.a), b = arg(s.b), c = arg(s.c);
        if (!a || !b || !c) return std::nullopt;
        per_element[i] = is_elem(s.a) || is_elem(s.b) || is_elem(s.c);
        switch (s.kind) {
          case Step::kAlu:
            value[i] = t.expr.alu(s.alu, *a, *b);
            break;
          case Step::kAct:
            value[i] = t.expr.act(s.act, *a, s.scale, s.bias);
            break;
          case Step::kSelect:
            value[i] = t.expr.select(*a, *b, *c);
            break;
        }
        // A full value computed from scalars only (a filled tensor) stays a per-group scalar: a
        // per-element step reads it as a per-partition operand (stores broadcast it).
        break;
      }
      case Kind::kStore: {
        const auto k = static_cast<size_t>(in.operand);
        const auto src = static_cast<size_t>(in.src);
        if (k >= spec.operands.size() || src >= i || t.role[k] != Translation::Role::kUnused)
          return std::nullopt;
        if (in.space == Space::kFull) {
          MtArg v = value[src];
          if (!per_element[src]) v = t.expr.broadcast(v);
          t.role[k] = Translation::Role::kOutput;
          t.index[k] = outputs;
          t.expr.stores.emplace_back(v, outputs++);
        } else if (in.space == Space::kScalar && !per_element[src]) {
          t.role[k] = Translation::Role::kScalarOutput;
          t.index[k] = scalar_outputs;
          t.expr.scalar_stores.emplace_back(value[src], scalar_outputs++);
        } else {
          return std::nullopt;
        }
        break;
      }
      default:
        return std::nullopt;
    }
  }
  if (t.expr.stores.empty()) return std::nullopt;
  return t;
}

}  // namespace

std::optional<Program> build_group_multi_tensor(const std::string& name,
                                                const std::vector<TileProgramSpec>& specs,
                                                const CoreParams& core) {
  if (specs.empty()) return std::nullopt;
  std::optional<Translation> t = translate(specs[0]);
  if (!t) return std::nullopt;
  std::vector<MtGroup> groups;
  for (const TileProgramSpec& s : specs) {
    if (s.operands.size() != t->role.size()) return std::nullopt;
    MtGroup g;
    for (size_t k = 0; k < s.operands.size(); ++k) {
      const TileOperand& op = s.operands[k];
      const bool full =
          t->role[k] == Translation::Role::kTensor || t->role[k] == Translation::Role::kOutput;
      const TensorDesc d = full ? TensorDesc{op.address, op.dtype, s.shape, op.strides}
                                : TensorDesc{op.address, op.dtype, {1}, {1}};
      switch (t->role[k]) {
        case Translation::Role::kTensor:
          g.tensors.push_back(d);
          break;
        case Translation::Role::kOutput:
          g.outputs.push_back(d);
          break;
        case Translation::Role::kScalar:
          g.scalars.push_back(d);
          break;
        case Translation::Role::kScalarOutput:
          g.scalar_outputs.push_back(d);
          break;
        case Translation::Role::kUnused:
          break;
      }
    }
    groups.push_back(std::move(g));
  }
  return build_multi_tensor(name, groups, t->expr, core);
}

}  // namespace neuronsim::kernels::compiler
