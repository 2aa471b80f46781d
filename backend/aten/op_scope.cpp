#include "aten/op_scope.h"

#include <ATen/core/ivalue.h>

#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "accelerator/context.h"
#include "neuronsim/runtime/trace_session.h"
#include "neuronsim/sim/trace_args.h"

namespace neuronsim::backend {
namespace {

// The inputs' description is JSON text written straight into a reused buffer (what
// nlohmann::json would dump for [{"device", "dtype", "shape"} | scalar | [ints] | null, ...]):
// an op under a trace costs no JSON values.
std::string& inputs_buffer() {
  static thread_local std::string buf;
  return buf;
}

void append_tensor(std::string& out, const at::Tensor& t) {
  if (!t.defined()) {
    out += "null";
    return;
  }
  out += "{\"device\":";
  sim::append_json_string(out, t.device().str());
  out += ",\"dtype\":";
  sim::append_json_string(out, c10::toString(t.scalar_type()));
  out += ",\"shape\":[";
  fmt::format_to(std::back_inserter(out), "{}", fmt::join(t.sizes(), ","));
  out += "]}";
}

void begin(bool& active, std::string_view name, std::string_view inputs) {
  if (!runtime::Runtime::initialized() || !runtime::TraceSession::active()) return;
  with_runtime([&](runtime::Runtime& r) {
    if (runtime::TraceSession* s = runtime::TraceSession::active()) {
      s->op_begin(r, name, inputs);
      active = true;
    }
    return 0;
  });
}

}  // namespace

OpScope::OpScope(const std::string& name, c10::ArrayRef<c10::IValue> args) {
  if (!runtime::TraceSession::active()) return;
  std::string& out = inputs_buffer();
  out.assign("[");
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (i) out += ',';
    if (v.isTensor()) {
      append_tensor(out, v.toTensor());
    } else if (v.isTensorList()) {
      out += '[';
      bool first = true;
      for (const at::Tensor& t : v.toTensorList()) {
        if (!first) out += ',';
        first = false;
        append_tensor(out, t);
      }
      out += ']';
    } else if (v.isScalar()) {
      sim::append_json_number(out, v.toScalar().toDouble());
    } else if (v.isIntList()) {
      out += '[';
      fmt::format_to(std::back_inserter(out), "{}", fmt::join(v.toIntVector(), ","));
      out += ']';
    } else {
      out += "null";
    }
  }
  out += ']';
  begin(active_, name, out);
}

OpScope::OpScope(const std::string& name, std::initializer_list<at::Tensor> tensors) {
  if (!runtime::TraceSession::active()) return;
  std::string& out = inputs_buffer();
  out.assign("[");
  bool first = true;
  for (const at::Tensor& t : tensors) {
    if (!first) out += ',';
    first = false;
    append_tensor(out, t);
  }
  out += ']';
  begin(active_, name, out);
}

OpScope::~OpScope() {
  if (!active_) return;
  with_runtime([](runtime::Runtime& r) {
    if (runtime::TraceSession* s = runtime::TraceSession::active()) s->op_end(r);
    return 0;
  });
}

}  // namespace neuronsim::backend
