// tests/core/test_launch_env.cpp: rank and world size from torchrun, Slurm and Open MPI variables.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "core/launch_env.h"
#include "tests/support/error_of.h"

namespace rn50 {
namespace {

LaunchEnv read(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

TEST(LaunchEnv, NoLauncherMeansOneProcess) {
  const LaunchEnv env = read({});
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.source, "none");
}

TEST(LaunchEnv, TorchrunWinsOverSlurmAndOpenMpi) {
  const LaunchEnv env = read({{"RANK", "5"},
                              {"WORLD_SIZE", "8"},
                              {"LOCAL_RANK", "1"},
                              {"MASTER_ADDR", "node0"},
                              {"MASTER_PORT", "29500"},
                              {"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
}

TEST(LaunchEnv, SlurmAndOpenMpi) {
  LaunchEnv env = read({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "3"}});
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 3);
  env = read({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(env.source, "openmpi");
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 1);        // no local rank given: the global one
  EXPECT_EQ(env.local_world_size, 0);  // not given: unknown
}

TEST(LaunchEnv, LocalWorldSizeAndRendezvousFromAnyLauncher) {
  LaunchEnv env = read({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_EQ(env.local_world_size, 2);
  env = read({{"SLURM_PROCID", "1"},
              {"SLURM_NTASKS", "4"},
              {"SLURM_NTASKS_PER_NODE", "2"},
              {"MASTER_ADDR", "n0"},
              {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "n0");
  EXPECT_EQ(env.master_port, 1234);
  env = read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "5"}, {"SLURM_NTASKS_PER_NODE", "2(x2),1"}});
  EXPECT_EQ(env.local_world_size, 0);  // uneven nodes
  env = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(env.local_world_size, 2);
}

// The processes that share this host's memory: the launcher's local count, else (Slurm's uneven nodes) the whole
// world, and one process without a launcher.
TEST(LaunchEnv, LocalProcessesShareTheHost) {
  EXPECT_EQ(local_processes(read({})), 1);
  EXPECT_EQ(local_processes(read({{"RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "2"}})), 2);
  EXPECT_EQ(local_processes(read({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "5"}, {"SLURM_NTASKS_PER_NODE", "2(x2),1"}})),
            5);
  EXPECT_EQ(local_processes(read({{"RANK", "0"}, {"WORLD_SIZE", "3"}})), 3);  // torchrun without LOCAL_WORLD_SIZE
}

TEST(LaunchEnv, BadValuesNameTheVariable) {
  using testing::config_error_of;
  EXPECT_NE(config_error_of([] { read({{"RANK", "x"}, {"WORLD_SIZE", "2"}}); }).find("RANK"), std::string::npos);
  EXPECT_NE(config_error_of([] { read({{"RANK", "2"}, {"WORLD_SIZE", "2"}}); }).find("not below"), std::string::npos);
  EXPECT_NE(config_error_of([] { read({{"WORLD_SIZE", "2"}}); }).find("RANK"), std::string::npos);
  EXPECT_NE(config_error_of([] { read({{"RANK", "0"}, {"WORLD_SIZE", "0"}}); }).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(config_error_of([] {
              read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "-4"}});
            }).find("MASTER_PORT"),
            std::string::npos);
}

TEST(LaunchEnv, FewCudaHardwareQueuesAreWarnedAbout) {
  EXPECT_EQ(cuda_hardware_queues_warning(nullptr), "");
  EXPECT_EQ(cuda_hardware_queues_warning("32"), "");
  EXPECT_EQ(cuda_hardware_queues_warning("64"), "");
  EXPECT_NE(cuda_hardware_queues_warning("1").find("CUDA_DEVICE_MAX_CONNECTIONS=1 "), std::string::npos);
  EXPECT_NE(cuda_hardware_queues_warning("8").find("waits behind the training step"), std::string::npos);
  EXPECT_NE(cuda_hardware_queues_warning("lots"), "");  // not a number: not known to give 32 queues
}

TEST(LaunchEnv, CudaHardwareQueuesSetOnlyWhereTheUserDidNot) {
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::string saved = before ? before : "";
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_EQ(widen_cuda_hardware_queues(), "32");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4", 1);
  EXPECT_EQ(widen_cuda_hardware_queues(), "4");  // the user's value is kept
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "4");
  if (before)
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved.c_str(), 1);
  else
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
}

}  // namespace
}  // namespace rn50
