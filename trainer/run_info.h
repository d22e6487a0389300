// trainer/run_info.h: run.json, what a run ran on (host, CPU, memory, processes, the start table's findings such as
// the GPU), written when the run starts so that its report can name the machine (torch-free).
#pragma once

#include <array>
#include <optional>
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
  int host_cores = 0;     // the host's online CPUs: what its load average counts against
  // /proc/loadavg's 1-, 5- and 15-minute load averages (the host's, in a container too) before the run trains: work
  // besides the run that makes its rate a loaded machine's (rn50 compare warns of it).
  std::optional<std::array<double, 3>> load_average;
};
HostFacts read_host_facts();

// The three load averages of a /proc/loadavg text ("0.52 0.58 0.59 1/467 12345"); none where it does not parse.
std::optional<std::array<double, 3>> parse_load_average(const std::string& text);

// Writes `path` atomically: the time (UTC), the host's facts (the load average as "load_average": [1, 5, 15 min]),
// `world_size` and the start table's rows whose names are
// in parentheses (what the run found: device, kernels, input, utilisation, data parallel ...), in their order.
void write_run_info(const std::string& path, int world_size,
                    const std::vector<std::pair<std::string, std::string>>& start_rows);

}  // namespace rn50::trainer
