// gpu/nccl_group.cpp: ProcessGroupNCCL behind the Communicator interface.
#include "gpu/nccl_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "trainer/c10d_adapter.h"

namespace rn50::gpu {

std::unique_ptr<trainer::Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                              int world, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
  return std::make_unique<trainer::C10dCommunicator<c10d::ProcessGroupNCCL>>(group, rank, world, "nccl",
                                                                             /*average_natively=*/true);
}

}  // namespace rn50::gpu
