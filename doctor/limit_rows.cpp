// doctor/limit_rows.cpp: the limit rows' wording and the rules behind their verdicts.
#include "doctor/limit_rows.h"

#include <algorithm>

#include "core/log.h"

namespace rn50::doctor {
namespace {

std::string cpus_text(double cpus) { return strprintf("%.3g CPU%s", cpus, cpus == 1.0 ? "" : "s"); }

}  // namespace

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < (uint64_t{1} << 20)) return strprintf("%.0f KiB", b / 1024.0);
  if (bytes < (uint64_t{1} << 30)) return strprintf("%.0f MiB", b / (1024.0 * 1024.0));
  return strprintf("%.1f GiB", b / (1024.0 * 1024.0 * 1024.0));
}

ReportRow usable_cores_row(const ProcessLimits& limits) {
  const int cores = cores_within_quota(limits.affinity_cpus, limits.cgroup.cpus);
  ReportRow row{"cpu", "usable cores", strprintf("%d of %d", cores, limits.hardware_cpus), "ok", ""};
  if (cores >= limits.hardware_cpus) return row;
  row.verdict = "warn";
  const bool masked = limits.affinity_cpus < limits.hardware_cpus;
  if (cores < limits.affinity_cpus) {
    row.note =
        strprintf("a CPU quota of %s leaves %d of the %d in the affinity mask%s; workers: -1 starts %d decode thread%s",
                  cpus_text(*limits.cgroup.cpus).c_str(), cores, limits.affinity_cpus,
                  masked ? " (which hides the rest)" : "", cores, cores == 1 ? "" : "s");
  } else {
    row.note = "the affinity mask hides cores from this process";
  }
  return row;
}

namespace {

ReportRow cpu_quota_row(const ProcessLimits& limits) {
  ReportRow row{"limits", "CPU quota (cgroup)", "none", "ok", ""};
  const auto& cg = limits.cgroup;
  if (!cg.cpus) return row;
  row.value = strprintf("%s (cgroup v%d)", cpus_text(*cg.cpus).c_str(), cg.cpu_version);
  row.note = cg.cpu_file;
  if (*cg.cpus < limits.affinity_cpus) {
    row.verdict = "warn";
    row.note =
        strprintf("decoding and the training step share the time of %s, fewer than the %d of the affinity mask (%s)",
                  cpus_text(*cg.cpus).c_str(), limits.affinity_cpus, cg.cpu_file.c_str());
  }
  return row;
}

ReportRow memory_row(const ProcessLimits& limits) {
  const auto& cg = limits.cgroup;
  const std::string machine = limits.physical_memory > 0 ? format_bytes(limits.physical_memory) + " in the machine"
                                                         : "the machine's size unknown";
  ReportRow row{"limits", "memory limit (cgroup)", "none (" + machine + ")", "ok", ""};
  // A limit at or above the machine's memory is no limit (v1 often holds such a number).
  if (!cg.memory_bytes || (limits.physical_memory > 0 && *cg.memory_bytes >= limits.physical_memory)) return row;
  row.value =
      strprintf("%s (cgroup v%d; %s)", format_bytes(*cg.memory_bytes).c_str(), cg.memory_version, machine.c_str());
  const int processes = std::max(1, limits.gpus);
  const uint64_t needed = kHostMemoryPerProcess * static_cast<uint64_t>(processes);
  if (*cg.memory_bytes < needed) {
    row.verdict = "bad";
    // One process per GPU: rn50 launch and torchrun start as many in one container.
    const std::string who =
        processes == 1 ? "a training process needs" : strprintf("%d training processes need, one per GPU", processes);
    row.note = strprintf(
        "below the %s %s (peaks of 1.1-1.6 GiB a process measured on H200s): the kernel ends the run at the limit",
        format_bytes(needed).c_str(), who.c_str());
  } else {
    row.note =
        "the page cache counts against it too: a dataset larger than what the run leaves free is read from "
        "storage every epoch (" +
        cg.memory_file + ")";
  }
  return row;
}

ReportRow memlock_row(const ProcessLimits& limits) {
  ReportRow row{"limits", "memlock limit (ulimit -l)", "unlimited", "ok", ""};
  if (!limits.memlock) return row;
  row.value = format_bytes(*limits.memlock);
  if (limits.gpus == 0) {
    row.verdict = "info";
    row.note = "matters on GPUs only (NCCL's network transports)";
  } else {
    row.verdict = "warn";
    row.note = "NCCL over InfiniBand or RoCE locks its buffers and fails beyond this limit: --ulimit memlock=-1";
  }
  return row;
}

ReportRow shm_row(const ProcessLimits& limits) {
  ReportRow row{"limits", "/dev/shm size", limits.shm ? format_bytes(*limits.shm) : "absent", "info", ""};
  if (limits.gpus < 2) {
    row.note = "used by NCCL between GPUs; one GPU or the CPU do not need it";
  } else if (!limits.shm || *limits.shm < kShmForNccl) {
    row.verdict = "warn";
    row.note = strprintf(
        "NCCL between this machine's %d GPUs keeps its buffers there: below %s a data-parallel run "
        "can fail as NCCL starts (--ipc=host or --shm-size=1g)",
        limits.gpus, format_bytes(kShmForNccl).c_str());
  } else {
    row.verdict = "ok";
  }
  return row;
}

}  // namespace

std::vector<ReportRow> limit_rows(const ProcessLimits& limits) {
  return {cpu_quota_row(limits), memory_row(limits), memlock_row(limits), shm_row(limits)};
}

}  // namespace rn50::doctor
