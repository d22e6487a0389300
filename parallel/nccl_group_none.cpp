// parallel/nccl_group_none.cpp: the CPU-only build's make_nccl_communicator: data parallel on GPUs needs NCCL.
#include "core/errors.h"
#include "parallel/nccl_group.h"

namespace rn50::parallel {

std::unique_ptr<parallel::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                               std::chrono::milliseconds) {
  throw ConfigError("data parallel on GPUs needs NCCL, and this rn50 was built without CUDA");
}

}  // namespace rn50::parallel
