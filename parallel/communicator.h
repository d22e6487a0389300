// parallel/communicator.h: the collectives a data-parallel run needs, over any c10d backend (NCCL, Gloo).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rn50::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string backend() const = 0;  // "nccl" | "gloo"
  // Starts averaging `tensor` over the ranks, in place. The returned function finishes it: on NCCL it makes
  // the current CUDA stream wait (the host does not block, so it can be captured in a CUDA graph); on Gloo
  // it blocks until the result is in `tensor`. Every rank must start the same all-reduces in the same order.
  virtual std::function<void()> start_mean(at::Tensor tensor) = 0;
  // Sums in place and finishes before returning (host-blocking on Gloo; stream-ordered on NCCL).
  virtual void sum(at::Tensor tensor) = 0;
  // Copies rank 0's tensors into every rank's.
  virtual void broadcast_from_rank0(std::vector<at::Tensor> tensors) = 0;
  // Waits for outstanding collectives and closes the backend's communicators. A NCCL process group left
  // to its destructor aborts instead, which hung for the whole timeout on the H200.
  virtual void shutdown() = 0;
};

}  // namespace rn50::parallel
