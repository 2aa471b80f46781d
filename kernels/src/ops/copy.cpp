// Copies, casts and constants: clone, cat, tril/triu eagerly; in compiled graphs also the
// framework's casts and in-place copies and the factories of one value.
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/graph/lowerer.h"
#include "neuronsim/kernels/spmd.h"
#include "rule_tables.h"

namespace neuronsim::kernels::ops {
namespace {

using graph::Lowerer;

// out = the argument `from` (a copy, possibly broadcasting or casting).
void lower_copy(Lowerer& l, const char* from) {
  l.begin();
  l.copy(l.node().outputs.at(0), l.operand(from));
}

// out = value everywhere.
void lower_constant(Lowerer& l, double value) {
  l.begin();
  l.copy(l.node().outputs.at(0), Arg::constant(static_cast<float>(value)));
}

}  // namespace

std::vector<OpRule> copy_rules() {
  std::vector<OpRule> ops;
  OpRule clone = make_rule("aten::clone");
  clone.build = [](const OpCall& call) {
    return Programs{build_copy_grid(call.name(), call.tensor(0).desc, call.output(0).desc,
                                    call.core(), call.grid())};
  };
  clone.lower = [](Lowerer& l) { lower_copy(l, "self"); };
  ops.push_back(clone);

  OpRule cat = make_rule("aten::cat");
  cat.build = [](const OpCall& call) {
    const TensorArg out = call.output(0);
    const int64_t dim = call.dim("dim", out.dim());
    std::vector<std::pair<TensorDesc, TensorDesc>> pairs;
    int64_t off = 0;
    for (const TensorArg& t : call.tensors("tensors")) {
      if (t.dim() == 1 && t.numel() == 0 && out.dim() > 1) continue;  // legacy empty inputs
      if (t.numel()) pairs.emplace_back(t.desc, out.narrow(dim, off, t.size(dim)).desc);
      off += t.size(dim);
    }
    return Programs{build_copies(call.name(), pairs, call.core())};
  };
  ops.push_back(cat);

  for (const char* n : {"aten::tril", "aten::triu"}) {
    const bool lower = std::string(n) == "aten::tril";
    OpRule tri = make_rule(n);
    tri.build = [lower](const OpCall& call) {
      return Programs{build_triangle(call.name(), call.tensor(0).desc, call.output(0).desc,
                                     call.integer("diagonal", 0), lower, call.core())};
    };
    tri.supports = [](const OpCall& call) { return call.tensor(0).dim() >= 2; };
    ops.push_back(tri);
  }

  // Casts and copies the framework emits in graphs (eagerly they are the device's copy path).
  for (const auto& [name, from] : std::initializer_list<std::pair<const char*, const char*>>{
           {"aten::_to_copy", "self"}, {"aten::copy", "src"}, {"aten::lift_fresh_copy", "self"}}) {
    OpRule r = make_rule(name);
    r.lower = [from = from](Lowerer& l) { lower_copy(l, from); };
    ops.push_back(r);
  }
  // An in-place copy into a graph input (kept input mutations): the result lives in `self`
  // (the driver roots it there).
  OpRule copy_ = make_rule("aten::copy_");
  copy_.lower = [](Lowerer& l) { lower_copy(l, "src"); };
  ops.push_back(copy_);

  // Factories of one value.
  for (const auto& [name, arg] :
       std::initializer_list<std::pair<const char*, const char*>>{{"aten::full", "fill_value"},
                                                                  {"aten::full_like", "fill_value"},
                                                                  {"aten::scalar_tensor", "s"}}) {
    OpRule r = make_rule(name);
    r.lower = [arg = arg](Lowerer& l) { lower_constant(l, l.number(arg, 0.0)); };
    ops.push_back(r);
  }
  for (const auto& [name, value] :
       std::initializer_list<std::pair<const char*, double>>{{"aten::zeros", 0.0},
                                                             {"aten::zeros_like", 0.0},
                                                             {"aten::ones", 1.0},
                                                             {"aten::ones_like", 1.0}}) {
    OpRule r = make_rule(name);
    r.lower = [value = value](Lowerer& l) { lower_constant(l, value); };
    ops.push_back(r);
  }
  return ops;
}

}  // namespace neuronsim::kernels::ops
