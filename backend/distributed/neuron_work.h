#pragma once
// The Work a neuron collective returns. Its future completes when the data is in place (at once
// for collectives whose data travels with the header exchange or is posted with it, on Gloo's
// thread when Gloo's collective moves it)
// and carries the collective's simulated end: wait(), like NCCL's, blocks the host only until
// the data is there and makes the *current neuron stream* wait for the collective's end, so
// later kernels on that stream start after it in simulated time.
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace neuronsim::backend::distributed {

class NeuronWork : public c10d::Work {
 public:
  NeuronWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
             c10::intrusive_ptr<c10::ivalue::Future> future);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 protected:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/// Work whose Gloo part completes only when waited on (sends, receives, some collectives):
/// wait() runs `finish` once, on the waiting thread, and `finish` completes the future.
class WaitedWork final : public NeuronWork {
 public:
  WaitedWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
             c10::intrusive_ptr<c10::ivalue::Future> future, std::function<void()> finish);
  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;

 private:
  void run_finish();
  std::function<void()> finish_;
  std::mutex mutex_;
};

/// A c10d::DistBackendError carrying `what` (torch.distributed.DistBackendError in Python).
std::exception_ptr backend_error(const std::string& what);
/// An exception's message, without a C++ backtrace.
std::string message_of(const std::exception_ptr& e);

/// A future whose completion makes the waiting neuron stream wait (devices = {neuron:device}).
c10::intrusive_ptr<c10::ivalue::Future> make_future(c10::DeviceIndex device);

}  // namespace neuronsim::backend::distributed
