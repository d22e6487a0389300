// tests/doctor/test_limit_rows.cpp: the doctor's usable-cores and limit rows: values, and the verdict for each
// limit that slows training or breaks it (a CPU quota below the mask, too little memory, memlock, /dev/shm).
#include <gtest/gtest.h>

#include <string>

#include "doctor/limit_rows.h"

namespace rn50::doctor {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

// A 16-core, 64 GiB machine with nothing limited, as outside a container.
ProcessLimits unlimited() {
  ProcessLimits l;
  l.hardware_cpus = 16;
  l.affinity_cpus = 16;
  l.physical_memory = 64 * kGiB;
  l.shm = 32 * kGiB;
  return l;
}

// The same machine under a CPU quota read from `file`.
ProcessLimits with_quota(double cpus, int version, const std::string& file) {
  ProcessLimits l = unlimited();
  l.cgroup.cpus = cpus;
  l.cgroup.cpu_version = version;
  l.cgroup.cpu_file = file;
  return l;
}

ReportRow row_named(const ProcessLimits& limits, const std::string& check) {
  for (const auto& row : limit_rows(limits))
    if (row.check == check) return row;
  ADD_FAILURE() << "no row " << check;
  return {};
}

TEST(LimitRows, NothingLimitedIsOk) {
  const ProcessLimits l = unlimited();
  const auto rows = limit_rows(l);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) EXPECT_EQ(row.section, "limits");
  EXPECT_EQ(rows[0].check, "CPU quota (cgroup)");
  EXPECT_EQ(rows[0].value, "none");
  EXPECT_EQ(rows[0].verdict, "ok");
  EXPECT_EQ(rows[1].check, "memory limit (cgroup)");
  EXPECT_EQ(rows[1].value, "none (64.0 GiB in the machine)");
  EXPECT_EQ(rows[1].verdict, "ok");
  EXPECT_EQ(rows[2].check, "memlock limit (ulimit -l)");
  EXPECT_EQ(rows[2].value, "unlimited");
  EXPECT_EQ(rows[2].verdict, "ok");
  EXPECT_EQ(rows[3].check, "/dev/shm size");
  EXPECT_EQ(rows[3].value, "32.0 GiB");
  EXPECT_EQ(rows[3].verdict, "info");  // no GPUs: nothing uses it
  const ReportRow cores = usable_cores_row(l);
  EXPECT_EQ(cores.section, "cpu");
  EXPECT_EQ(cores.value, "16 of 16");
  EXPECT_EQ(cores.verdict, "ok");
  EXPECT_EQ(cores.note, "");
}

TEST(LimitRows, AQuotaBelowTheMaskLimitsTheCoresAndWarns) {
  const ProcessLimits l = with_quota(1.5, 2, "/sys/fs/cgroup/cpu.max");
  const ReportRow quota = row_named(l, "CPU quota (cgroup)");
  EXPECT_EQ(quota.value, "1.5 CPUs (cgroup v2)");
  EXPECT_EQ(quota.verdict, "warn");
  EXPECT_EQ(quota.note,
            "decoding and the training step share the time of 1.5 CPUs, fewer than the 16 of the affinity mask "
            "(/sys/fs/cgroup/cpu.max)");
  const ReportRow cores = usable_cores_row(l);
  EXPECT_EQ(cores.value, "2 of 16");
  EXPECT_EQ(cores.verdict, "warn");
  EXPECT_EQ(cores.note,
            "a CPU quota of 1.5 CPUs leaves 2 of the 16 in the affinity mask; workers: -1 starts 2 decode threads");
}

TEST(LimitRows, AQuotaAtOrAboveTheMaskIsOk) {
  ProcessLimits l = with_quota(8.0, 1, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  l.affinity_cpus = 4;  // e.g. Slurm's cpuset
  const ReportRow quota = row_named(l, "CPU quota (cgroup)");
  EXPECT_EQ(quota.value, "8 CPUs (cgroup v1)");
  EXPECT_EQ(quota.verdict, "ok");
  EXPECT_EQ(quota.note, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  const ReportRow cores = usable_cores_row(l);
  EXPECT_EQ(cores.value, "4 of 16");
  EXPECT_EQ(cores.verdict, "warn");
  EXPECT_EQ(cores.note, "the affinity mask hides cores from this process");
  l.cgroup.cpus = 2.0;  // both hide cores
  EXPECT_EQ(usable_cores_row(l).note,
            "a CPU quota of 2 CPUs leaves 2 of the 4 in the affinity mask (which hides the rest); workers: -1 starts "
            "2 decode threads");
  l.cgroup.cpus = 1.0;  // one CPU, one thread: singular
  EXPECT_EQ(usable_cores_row(l).note,
            "a CPU quota of 1 CPU leaves 1 of the 4 in the affinity mask (which hides the rest); workers: -1 starts 1 "
            "decode thread");
  EXPECT_EQ(row_named(l, "CPU quota (cgroup)").value, "1 CPU (cgroup v1)");
}

TEST(LimitRows, TooLittleMemoryIsBadPerGpuProcess) {
  ProcessLimits l = unlimited();
  l.cgroup.memory_bytes = 1 * kGiB;
  l.cgroup.memory_version = 1;
  l.cgroup.memory_file = "/sys/fs/cgroup/memory/memory.limit_in_bytes";
  ReportRow memory = row_named(l, "memory limit (cgroup)");
  EXPECT_EQ(memory.value, "1.0 GiB (cgroup v1; 64.0 GiB in the machine)");
  EXPECT_EQ(memory.verdict, "bad");
  EXPECT_EQ(memory.note,
            "below the 2.0 GiB a training process needs (peaks of 1.1-1.6 GiB a process measured on H200s): the "
            "kernel ends the run at the limit");
  l.cgroup.memory_bytes = 4 * kGiB;
  memory = row_named(l, "memory limit (cgroup)");
  EXPECT_EQ(memory.verdict, "ok");
  EXPECT_NE(memory.note.find("page cache"), std::string::npos) << memory.note;
  l.gpus = 4;  // four processes need 8 GiB
  memory = row_named(l, "memory limit (cgroup)");
  EXPECT_EQ(memory.verdict, "bad");
  EXPECT_NE(memory.note.find("below the 8.0 GiB 4 training processes need, one per GPU (peaks"), std::string::npos)
      << memory.note;
}

TEST(LimitRows, AMemoryLimitAboveTheMachineIsNone) {
  ProcessLimits l = unlimited();
  l.cgroup.memory_bytes = 128 * kGiB;
  l.cgroup.memory_version = 1;
  const ReportRow memory = row_named(l, "memory limit (cgroup)");
  EXPECT_EQ(memory.value, "none (64.0 GiB in the machine)");
  EXPECT_EQ(memory.verdict, "ok");
}

TEST(LimitRows, AFiniteMemlockWarnsOnlyWhereThereAreGpus) {
  ProcessLimits l = unlimited();
  l.memlock = 64 * 1024;  // Docker's usual default
  ReportRow memlock = row_named(l, "memlock limit (ulimit -l)");
  EXPECT_EQ(memlock.value, "64 KiB");
  EXPECT_EQ(memlock.verdict, "info");
  l.gpus = 1;
  l.memlock = 8 * kMiB;
  memlock = row_named(l, "memlock limit (ulimit -l)");
  EXPECT_EQ(memlock.value, "8 MiB");
  EXPECT_EQ(memlock.verdict, "warn");
  EXPECT_NE(memlock.note.find("--ulimit memlock=-1"), std::string::npos) << memlock.note;
}

TEST(LimitRows, SmallSharedMemoryWarnsWithSeveralGpus) {
  ProcessLimits l = unlimited();
  l.shm = 64 * kMiB;  // Docker's default
  l.gpus = 1;
  EXPECT_EQ(row_named(l, "/dev/shm size").verdict, "info");
  l.gpus = 8;
  ReportRow shm = row_named(l, "/dev/shm size");
  EXPECT_EQ(shm.value, "64 MiB");
  EXPECT_EQ(shm.verdict, "warn");
  EXPECT_EQ(shm.note,
            "NCCL between this machine's 8 GPUs keeps its buffers there: below 1.0 GiB a data-parallel run can fail "
            "as NCCL starts (--ipc=host or --shm-size=1g)");
  l.shm = std::nullopt;
  shm = row_named(l, "/dev/shm size");
  EXPECT_EQ(shm.value, "absent");
  EXPECT_EQ(shm.verdict, "warn");
  l.shm = 1 * kGiB;
  EXPECT_EQ(row_named(l, "/dev/shm size").verdict, "ok");
}

TEST(LimitRows, FormatsBytes) {
  EXPECT_EQ(format_bytes(64 * 1024), "64 KiB");
  EXPECT_EQ(format_bytes(256 * kMiB), "256 MiB");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.5 GiB");
}

}  // namespace
}  // namespace rn50::doctor
