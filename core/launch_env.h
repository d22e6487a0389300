// core/launch_env.h: which process of a multi-process launch this is, read from torchrun, Slurm or Open MPI variables;
// and the CUDA variable rn50 sets for itself before CUDA starts.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace rn50 {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 0;     // processes on this host; 0 when the launcher does not say
  std::string master_addr;      // MASTER_ADDR (torchrun sets it; set it yourself under Slurm or Open MPI); may be empty
  int master_port = 0;          // MASTER_PORT; 0 when unset
  std::string source = "none";  // torchrun | slurm | openmpi | none
};

// The processes of this launch on this host, which share its memory (a container's limit): the launcher's local
// count, else the whole world where the launcher does not say (Slurm's uneven "2(x3)": at most that many), 1 alone.
int local_processes(const LaunchEnv& env);

// Reads, in this order of precedence: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE), Open MPI (OMPI_COMM_WORLD_RANK,
// _SIZE, _LOCAL_RANK, _LOCAL_SIZE); then MASTER_ADDR and MASTER_PORT, whichever launcher it was.
// `getenv` returns a variable's value, or nullopt when unset (tests pass their own). A malformed or
// inconsistent value throws ConfigError naming the variable.
LaunchEnv read_launch_env(const std::function<std::optional<std::string>(const std::string&)>& getenv);
LaunchEnv read_launch_env();  // from the process environment

// The hardware queues CUDA gives this process (CUDA_DEVICE_MAX_CONNECTIONS, CUDA's default 8) for decode: gpu.
// With 8, LibTorch's pooled streams share queues, and nvJPEG's work queued a step ahead waited behind the training
// step on its queue: training ran several times further below synthetic data than with 32 (docs/gpu-decoding.md).
inline constexpr int kGpuDecodeCudaQueues = 32;

// Sets CUDA_DEVICE_MAX_CONNECTIONS to kGpuDecodeCudaQueues unless the user set it; returns the value in force. Only
// effective before CUDA starts in this process.
std::string widen_cuda_hardware_queues();

// For rn50 doctor: what a user-set CUDA_DEVICE_MAX_CONNECTIONS (`value`, nullptr when unset) means for decode: gpu;
// empty when unset or at least kGpuDecodeCudaQueues.
std::string cuda_hardware_queues_warning(const char* value);

}  // namespace rn50
