// parallel/c10d_adapter.h: Communicator over a c10d process group or backend (ProcessGroupGloo in LibTorch
// 1.13, ProcessGroupNCCL in 2.x); include from .cpp files only.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <type_traits>
#include <utility>

#include "parallel/communicator.h"

namespace rn50::parallel {

// ProcessGroupNCCL (2.x) has shutdown(); LibTorch 1.13's ProcessGroupGloo does not.
template <class T, class = void>
struct HasShutdown : std::false_type {};
template <class T>
struct HasShutdown<T, std::void_t<decltype(std::declval<T&>().shutdown())>> : std::true_type {};

template <class Backend>
class C10dCommunicator final : public Communicator {
 public:
  // `average_natively`: the backend has ReduceOp::AVG (NCCL); otherwise the sum is divided afterwards.
  C10dCommunicator(c10::intrusive_ptr<Backend> backend, int world, std::string name, bool average_natively)
      : backend_(std::move(backend)), world_(world), name_(std::move(name)), average_natively_(average_natively) {}

  std::string backend() const override { return name_; }

  std::function<void()> start_mean(at::Tensor tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = average_natively_ ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
    auto work = backend_->allreduce(tensors, options);
    const bool divide = !average_natively_;
    const double world = world_;
    return [work, tensor, divide, world]() mutable {
      work->wait();
      if (divide) tensor.div_(world);
    };
  }

  void sum(at::Tensor tensor) override {
    std::vector<at::Tensor> tensors{dense(tensor)};
    backend_->allreduce(tensors, c10d::AllreduceOptions())->wait();
    if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
  }

  void shutdown() override {
    if constexpr (HasShutdown<Backend>::value) backend_->shutdown();
  }

  void broadcast_from_rank0(std::vector<at::Tensor> tensors) override {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{dense(t)};
      c10d::BroadcastOptions options;
      options.rootRank = 0;
      backend_->broadcast(one, options)->wait();
      if (!one[0].is_same(t)) t.copy_(one[0]);
    }
  }

 private:
  // Gloo wants contiguous tensors; a channels-last weight travels as a contiguous copy.
  static at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

  c10::intrusive_ptr<Backend> backend_;
  int world_;
  std::string name_;
  bool average_natively_;
};

}  // namespace rn50::parallel
