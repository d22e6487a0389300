// parallel/nccl_group.h: a Communicator over ProcessGroupNCCL, and any Communicator kept on the training stream (CUDA
// builds; elsewhere the NCCL call throws and the wrapper is the communicator itself).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "parallel/communicator.h"

namespace rn50::parallel {

// The NCCL communicator is created lazily by the first collective; `timeout` is NCCL's watchdog timeout for eager
// collectives, meant to stop the others when a rank died or hangs (not yet seen firing on a GPU; collectives
// replayed from a CUDA graph are outside it: see parallel/watchdog.h).
std::unique_ptr<parallel::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                               int world, std::chrono::milliseconds timeout);

// `inner` with every call made on the stream current now (the training stream), whichever thread makes it: the
// gradient hooks run on autograd's device thread, and NCCL and Gloo order their work after the caller's stream.
std::unique_ptr<parallel::Communicator> on_training_stream(std::unique_ptr<parallel::Communicator> inner);

}  // namespace rn50::parallel
