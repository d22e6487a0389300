// parallel/nccl_group_none.cpp: the CPU-only build's make_nccl_communicator (data parallel on GPUs needs NCCL) and
// on_training_stream (no streams: the communicator itself).
#include "core/errors.h"
#include "parallel/nccl_group.h"

namespace rn50::parallel {

std::unique_ptr<parallel::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                               std::chrono::milliseconds) {
  throw ConfigError("data parallel on GPUs needs NCCL, and this rn50 was built without CUDA");
}

std::unique_ptr<parallel::Communicator> on_training_stream(std::unique_ptr<parallel::Communicator> inner) {
  return inner;
}

}  // namespace rn50::parallel
