// doctor/limit_rows.h: the doctor's rows for the limits a container or job scheduler sets (usable cores, CPU
// quota, memory limit, memlock, /dev/shm), each with a verdict on whether it slows training or breaks it (torch-free).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "doctor/rows.h"
#include "core/limits.h"

namespace rn50::doctor {

// Host memory a training process needs, per process (one per GPU): the H200 ablation's runs peaked at 1.1-1.6 GiB
// resident (bench/results/2026-11-30-ablation), and a cgroup ends a process at its limit.
constexpr uint64_t kHostMemoryPerProcess = uint64_t{2} << 30;
// /dev/shm for NCCL between the GPUs of one container: NVIDIA's containers are started with --shm-size=1g, and
// Docker's default of 64 MiB makes NCCL fail when it opens its shared segments.
constexpr uint64_t kShmForNccl = uint64_t{1} << 30;

struct ProcessLimits {    // what the doctor read about this process
  int hardware_cpus = 1;  // the machine's
  int affinity_cpus = 1;  // in this process's affinity mask
  CgroupLimits cgroup;
  uint64_t physical_memory = 0;     // the machine's, bytes (0: unknown)
  std::optional<uint64_t> memlock;  // RLIMIT_MEMLOCK, bytes; none: unlimited
  std::optional<uint64_t> shm;      // /dev/shm's size, bytes; none: no /dev/shm
  int gpus = 0;                     // CUDA devices visible
};

// Section "cpu": the cores `workers: -1` uses, and what hides the others (the affinity mask, the quota).
ReportRow usable_cores_row(const ProcessLimits& limits);

// Section "limits": the CPU quota, the memory limit, memlock and /dev/shm.
std::vector<ReportRow> limit_rows(const ProcessLimits& limits);

// 64 KiB, 8 MiB, 1.5 GiB.
std::string format_bytes(uint64_t bytes);

}  // namespace rn50::doctor
