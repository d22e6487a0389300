// parallel/launch.h: `rn50 launch`: N local processes of one data-parallel run, without Python's torchrun.
#pragma once

#include <string>
#include <vector>

namespace rn50::parallel {

// One host's processes of a run: one a GPU, and no host has hundreds (a larger count is a typing mistake, and would
// fork until the host runs out).
constexpr int kMaxLocalProcesses = 256;

struct LaunchOptions {
  int processes = 1;
  int master_port = 0;            // 0: a free port of this host
  std::string program;            // the rn50 binary to start (this one)
  std::vector<std::string> args;  // after the program name, e.g. {"train", "--config", "x.yaml"}
  int grace_s = 10;               // after one process fails, how long the others get to stop before SIGKILL
};

// Starts the processes with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), passes SIGINT and SIGTERM on to them, and when one exits with an error stops
// the rest. Returns 0 when all succeeded, otherwise the first failure's exit code (128 + signal if killed).
int launch_local(const LaunchOptions& options);

}  // namespace rn50::parallel
