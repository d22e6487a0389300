// gpu/nccl_group.h: a Communicator over ProcessGroupNCCL (CUDA builds; elsewhere the call throws).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "trainer/communicator.h"

namespace rn50::gpu {

// The NCCL communicator is created lazily by the first collective; `timeout` bounds every collective
// (a rank that died or hangs makes the others stop instead of waiting forever).
std::unique_ptr<trainer::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int world, std::chrono::milliseconds timeout);

}  // namespace rn50::gpu
