#include "distributed/neuron_work.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

namespace neuronsim::backend::distributed {

NeuronWork::NeuronWork(int rank, c10d::OpType type, const char* title,
                       std::vector<at::Tensor> outputs,
                       c10::intrusive_ptr<c10::ivalue::Future> future)
    : c10d::Work(rank, type, title), outputs_(std::move(outputs)), future_(std::move(future)) {}

bool NeuronWork::isCompleted() {
  return future_->completed();
}

bool NeuronWork::isSuccess() const {
  return future_->completed() && !future_->hasError();
}

std::exception_ptr NeuronWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

std::vector<at::Tensor> NeuronWork::result() {
  return outputs_;
}

void NeuronWork::synchronize() {
  future_->waitAndThrow();
}

bool NeuronWork::wait(std::chrono::milliseconds) {
  // Blocks until the data is in place, then orders the current stream after the collective's
  // simulated end (Future::wait blocks the current streams on the events it recorded).
  future_->waitAndThrow();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  return future_;
}

WaitedWork::WaitedWork(int rank, c10d::OpType type, const char* title,
                       std::vector<at::Tensor> outputs,
                       c10::intrusive_ptr<c10::ivalue::Future> future, std::function<void()> finish)
    : NeuronWork(rank, type, title, std::move(outputs), std::move(future)),
      finish_(std::move(finish)) {}

void WaitedWork::run_finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finish_) return;
  auto finish = std::move(finish_);
  finish_ = nullptr;
  try {
    finish();
  } catch (...) {
    if (!future_->completed()) future_->setError(std::current_exception());
  }
}

bool WaitedWork::isCompleted() {
  return future_->completed();
}

bool WaitedWork::wait(std::chrono::milliseconds timeout) {
  run_finish();
  return NeuronWork::wait(timeout);
}

std::exception_ptr backend_error(const std::string& what) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, __LINE__}, what));
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

c10::intrusive_ptr<c10::ivalue::Future> make_future(c10::DeviceIndex device) {
  return c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()),
      std::vector<c10::Device>{c10::Device(c10::DeviceType::PrivateUse1, device)});
}

}  // namespace neuronsim::backend::distributed
