// parallel/nccl_group.h: a Communicator over ProcessGroupNCCL (CUDA builds; elsewhere the call throws).
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

}  // namespace rn50::parallel
