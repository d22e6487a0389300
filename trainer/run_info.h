// trainer/run_info.h: run.json, what a run ran on (host, CPU, memory, processes, the start table's findings such as
// the GPU), written when the run starts so that its report can name the machine (torch-free).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rn50::trainer {

inline constexpr char kRunInfoFile[] = "run.json";

struct HostFacts {
  std::string host;       // the host name
  std::string cpu_model;  // /proc/cpuinfo's "model name" ("" where there is none)
  int usable_cores = 0;   // the affinity mask's CPUs within the cgroup CPU quota (usable_cores())
  double memory_gib = 0;  // physical memory
};
HostFacts read_host_facts();

// Writes `path` atomically: the time (UTC), the host's facts, `world_size` and the start table's rows whose names are
// in parentheses (what the run found: device, kernels, input, utilisation, data parallel ...), in their order.
void write_run_info(const std::string& path, int world_size,
                    const std::vector<std::pair<std::string, std::string>>& start_rows);

}  // namespace rn50::trainer
