#pragma once
// An op-library call without a framework (kernels/ops/op_call.h): arguments and outputs by name,
// tensors in the test device's HBM. For testing op rules torch-free.
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "neuronsim/kernels/ops/op_call.h"

namespace neuronsim::testing {

class FakeOpCall final : public kernels::ops::OpCall {
 public:
  using TensorArg = kernels::ops::TensorArg;
  using ScalarType = kernels::ops::ScalarType;
  using ArgKind = kernels::ops::ArgKind;

  FakeOpCall(std::string name, const device_model::CoreParams& core)
      : name_(std::move(name)), core_(core) {}

  /// A contiguous tensor of `type` at HBM byte `address` (`data`: its host memory).
  static TensorArg hbm(uint64_t address, ScalarType type, std::vector<int64_t> sizes,
                       const void* data) {
    TensorArg t;
    t.defined = t.on_device = true;
    t.type = type;
    t.desc.address = address;
    t.desc.dtype = *kernels::ops::device_dtype(type);
    t.desc.sizes = std::move(sizes);
    t.desc.strides.assign(t.desc.sizes.size(), 1);
    for (int64_t d = static_cast<int64_t>(t.desc.sizes.size()) - 2; d >= 0; --d) {
      const auto i = static_cast<size_t>(d);
      t.desc.strides[i] = t.desc.strides[i + 1] * t.desc.sizes[i + 1];
    }
    t.data = data;
    return t;
  }

  FakeOpCall& arg(const std::string& name, TensorArg t) {
    order_.push_back(name);
    tensors_[name] = std::move(t);
    return *this;
  }
  FakeOpCall& arg(const std::string& name, double v) {
    order_.push_back(name);
    numbers_[name] = v;
    return *this;
  }
  FakeOpCall& arg(const std::string& name, const std::string& s) {
    order_.push_back(name);
    strings_[name] = s;
    return *this;
  }
  FakeOpCall& out(TensorArg t) {
    outputs_.push_back(std::move(t));
    return *this;
  }

  const std::string& name() const override { return name_; }
  size_t num_args() const override { return order_.size(); }
  ArgKind kind(std::string_view arg) const override {
    const std::string a(arg);
    if (tensors_.count(a)) return ArgKind::kTensor;
    if (numbers_.count(a)) return ArgKind::kFloat;
    if (strings_.count(a)) return ArgKind::kString;
    return ArgKind::kAbsent;
  }
  TensorArg tensor(std::string_view arg) const override {
    const auto it = tensors_.find(std::string(arg));
    return it == tensors_.end() ? TensorArg{} : it->second;
  }
  TensorArg tensor(size_t index) const override {
    return index < order_.size() ? tensor(order_[index]) : TensorArg{};
  }
  std::vector<TensorArg> tensors(std::string_view) const override { return {}; }
  double number(std::string_view arg, double fallback) const override {
    const auto it = numbers_.find(std::string(arg));
    return it == numbers_.end() ? fallback : it->second;
  }
  int64_t integer(std::string_view arg, int64_t fallback) const override {
    return static_cast<int64_t>(number(arg, static_cast<double>(fallback)));
  }
  std::vector<double> numbers(std::string_view) const override { return {}; }
  std::vector<int64_t> ints(std::string_view) const override { return {}; }
  std::string str(std::string_view arg) const override {
    const auto it = strings_.find(std::string(arg));
    return it == strings_.end() ? std::string() : it->second;
  }
  std::optional<ScalarType> scalar_type(std::string_view) const override { return std::nullopt; }
  size_t num_outputs() const override { return outputs_.size(); }
  TensorArg output(size_t i) const override {
    return i < outputs_.size() ? outputs_[i] : TensorArg{};
  }
  TensorArg count() const override { throw std::invalid_argument("no count"); }
  const device_model::CoreParams& core() const override { return core_; }
  uint32_t grid() const override { return 1; }

 private:
  std::string name_;
  const device_model::CoreParams& core_;
  std::vector<std::string> order_;
  std::map<std::string, TensorArg> tensors_;
  std::map<std::string, double> numbers_;
  std::map<std::string, std::string> strings_;
  std::vector<TensorArg> outputs_;
};

}  // namespace neuronsim::testing
