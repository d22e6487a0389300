// parallel/nccl_group.cpp: ProcessGroupNCCL behind the Communicator interface.
#include "parallel/nccl_group.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <utility>

#include "parallel/c10d_adapter.h"

namespace rn50::parallel {
namespace {

static_assert(parallel::HasShutdown<c10d::ProcessGroupNCCL>::value,
              "ProcessGroupNCCL::shutdown() is how rn50 closes the communicators (see parallel/communicator.h)");

// NCCL (and Gloo on GPUs) orders a collective after the work queued so far on the calling thread's current stream.
// The gradient hooks run on autograd's device thread, so every call first makes the training stream (current
// when the communicator was made) current there.
class OnTrainingStream final : public parallel::Communicator {
 public:
  explicit OnTrainingStream(std::unique_ptr<parallel::Communicator> inner)
      : inner_(std::move(inner)), stream_(c10::cuda::getCurrentCUDAStream()) {}
  std::string backend() const override { return inner_->backend(); }
  std::function<void()> start_mean(at::Tensor tensor) override {
    c10::cuda::CUDAStreamGuard guard(stream_);
    return inner_->start_mean(std::move(tensor));
  }
  void sum(at::Tensor tensor) override {
    c10::cuda::CUDAStreamGuard guard(stream_);
    inner_->sum(std::move(tensor));
  }
  void broadcast_from_rank0(std::vector<at::Tensor> tensors) override {
    c10::cuda::CUDAStreamGuard guard(stream_);
    inner_->broadcast_from_rank0(std::move(tensors));
  }
  void shutdown() override {
    stream_.synchronize();
    inner_->shutdown();
  }

 private:
  std::unique_ptr<parallel::Communicator> inner_;
  c10::cuda::CUDAStream stream_;
};

}  // namespace

std::unique_ptr<parallel::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                               int world, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
  return on_training_stream(std::make_unique<parallel::C10dCommunicator<c10d::ProcessGroupNCCL>>(
      group, world, "nccl", /*average_natively=*/true));
}

std::unique_ptr<parallel::Communicator> on_training_stream(std::unique_ptr<parallel::Communicator> inner) {
  return std::make_unique<OnTrainingStream>(std::move(inner));
}

}  // namespace rn50::parallel
