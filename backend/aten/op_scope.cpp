#include "aten/op_scope.h"

#include <ATen/core/ivalue.h>

#include <nlohmann/json.hpp>

#include "accelerator/context.h"
#include "neuronsim/runtime/trace_session.h"

namespace neuronsim::backend {
namespace {

nlohmann::json describe_tensor(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  return nlohmann::json{{"shape", t.sizes().vec()},
                        {"dtype", std::string(c10::toString(t.scalar_type()))},
                        {"device", t.device().str()}};
}

void begin(bool& active, const std::string& name, nlohmann::json inputs) {
  if (!runtime::Runtime::initialized() || !runtime::TraceSession::active()) return;
  with_runtime([&](runtime::Runtime& r) {
    if (runtime::TraceSession* s = runtime::TraceSession::active()) {
      s->op_begin(r, name, {{"inputs", std::move(inputs)}});
      active = true;
    }
    return 0;
  });
}

}  // namespace

OpScope::OpScope(const std::string& name, c10::ArrayRef<c10::IValue> args) {
  if (!runtime::TraceSession::active()) return;
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& v : args) {
    if (v.isTensor())
      inputs.push_back(describe_tensor(v.toTensor()));
    else if (v.isTensorList()) {
      nlohmann::json l = nlohmann::json::array();
      for (const at::Tensor& t : v.toTensorList()) l.push_back(describe_tensor(t));
      inputs.push_back(l);
    } else if (v.isScalar())
      inputs.push_back(v.toScalar().toDouble());
    else if (v.isIntList())
      inputs.push_back(v.toIntVector());
    else
      inputs.push_back(nullptr);
  }
  begin(active_, name, std::move(inputs));
}

OpScope::OpScope(const std::string& name, std::initializer_list<at::Tensor> tensors) {
  if (!runtime::TraceSession::active()) return;
  nlohmann::json inputs = nlohmann::json::array();
  for (const at::Tensor& t : tensors) inputs.push_back(describe_tensor(t));
  begin(active_, name, std::move(inputs));
}

OpScope::~OpScope() {
  if (!active_) return;
  with_runtime([](runtime::Runtime& r) {
    if (runtime::TraceSession* s = runtime::TraceSession::active()) s->op_end(r);
    return 0;
  });
}

}  // namespace neuronsim::backend
