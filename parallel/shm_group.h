// parallel/shm_group.h: a Communicator over shared host memory, for ranks on one host that NCCL cannot serve (ranks
// sharing a GPU) in builds without Gloo.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>

#include "parallel/communicator.h"

namespace rn50::parallel {

// Every collective goes through a POSIX shared-memory segment in chunks of `chunk_bytes` per rank: each rank copies
// its chunk into its own slot, waits for all, sums the slots in rank order (so every rank gets the same bits; on the
// GPU for GPU tensors, `cuda`: the segment is then page-locked) and copies the sum back, then waits again before the
// slots are reused. Host-blocking, so never inside a CUDA graph;
// start_mean's work runs when its finisher is called (after the backward pass, on the caller's stream), not in the
// gradient hook. Rank 0 makes the segment and names it through `store`; the name is unlinked once all have mapped it,
// so nothing is left in /dev/shm when a rank dies. A rank that does not come to a collective within `timeout` makes
// the others throw.
std::unique_ptr<Communicator> make_shm_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                    std::chrono::milliseconds timeout, bool cuda,
                                                    int64_t chunk_bytes = int64_t{4} << 20);

}  // namespace rn50::parallel
