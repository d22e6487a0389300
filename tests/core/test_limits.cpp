// tests/core/test_limits.cpp: the cgroup file parsers, finding a process's limits in fake cgroup v1, v2 and hybrid
// trees as containers and job schedulers lay them out, the quota's share of the affinity mask, memlock and /dev/shm.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>
#include <vector>

#include "core/affinity.h"
#include "core/limits.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50 {
namespace {

using rn50::testing::TempDir;

void put(const TempDir& root, const std::string& path, const std::string& text) {
  rn50::testing::write_file(root.path() + path, std::vector<uint8_t>(text.begin(), text.end()));
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

// What `docker run --cpus 1.5 --memory 1g` showed inside a container on this repository's cgroup v1 machine (ids
// shortened): each controller mounted with the container's own cgroup as its root.
void docker_v1(const TempDir& root, const std::string& quota, const std::string& memory) {
  put(root, "/proc/self/cgroup",
      "9:name=systemd:/docker/4c4d\n4:memory:/docker/4c4d\n2:cpuacct:/docker/4c4d\n1:cpu:/docker/4c4d\n"
      "0::/docker/4c4d\n");
  put(root, "/proc/self/mountinfo",
      "80 79 0:47 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755\n"
      "81 80 0:29 /docker/4c4d /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu\n"
      "82 80 0:30 /docker/4c4d /sys/fs/cgroup/cpuacct ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpuacct\n"
      "84 80 0:32 /docker/4c4d /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n");
  put(root, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", quota + "\n");
  put(root, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  put(root, "/sys/fs/cgroup/memory/memory.limit_in_bytes", memory + "\n");
}

TEST(Limits, ParsesCpuMax) {
  EXPECT_EQ(parse_cpu_max("150000 100000\n"), 1.5);
  EXPECT_EQ(parse_cpu_max("200000 100000"), 2.0);
  EXPECT_EQ(parse_cpu_max("50000 100000"), 0.5);
  EXPECT_EQ(parse_cpu_max("max 100000\n"), std::nullopt);  // no quota
  for (const char* bad : {"", "abc 100000", "100000", "100000 0", "-5 100000", "1 2 3", "1e5 100000", "100000 x"})
    EXPECT_EQ(parse_cpu_max(bad), std::nullopt) << bad;
}

TEST(Limits, ParsesCfsQuota) {
  EXPECT_EQ(parse_cfs_quota("100000\n", "100000\n"), 1.0);
  EXPECT_EQ(parse_cfs_quota("250000", "100000"), 2.5);
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), std::nullopt);  // no quota
  EXPECT_EQ(parse_cfs_quota("100000", "0"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("100000", ""), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("lots", "100000"), std::nullopt);
}

TEST(Limits, ParsesMemoryLimits) {
  EXPECT_EQ(parse_memory_limit("1073741824\n"), kGiB);
  EXPECT_EQ(parse_memory_limit("max\n"), std::nullopt);                    // v2: none
  EXPECT_EQ(parse_memory_limit("9223372036854771712"), std::nullopt);      // v1: none, as read on this machine
  EXPECT_EQ(parse_memory_limit("99999999999999999999999"), std::nullopt);  // past int64
  EXPECT_EQ(parse_memory_limit("0"), std::nullopt);
  EXPECT_EQ(parse_memory_limit("1G"), std::nullopt);
}

TEST(Limits, DockerOnCgroupV1) {
  TempDir root;
  docker_v1(root, "150000", "1073741824");
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, 1.5);
  EXPECT_EQ(limits.cpu_version, 1);
  EXPECT_EQ(limits.cpu_file, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  EXPECT_EQ(limits.memory_bytes, kGiB);
  EXPECT_EQ(limits.memory_version, 1);
  EXPECT_EQ(limits.memory_file, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

TEST(Limits, DockerOnCgroupV1WithoutLimits) {
  TempDir root;
  docker_v1(root, "-1", "9223372036854771712");
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, std::nullopt);
  EXPECT_EQ(limits.cpu_version, 0);
  EXPECT_EQ(limits.cpu_file, "");
  EXPECT_EQ(limits.memory_bytes, std::nullopt);
}

// Docker on a cgroup v2 machine: its own cgroup namespace, the container's cgroup mounted as the whole tree.
TEST(Limits, DockerOnCgroupV2) {
  TempDir root;
  put(root, "/proc/self/cgroup", "0::/\n");
  put(root, "/proc/self/mountinfo",
      "1085 1079 0:29 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup "
      "rw,nsdelegate,memory_recursiveprot\n");
  put(root, "/sys/fs/cgroup/cpu.max", "200000 100000\n");
  put(root, "/sys/fs/cgroup/memory.max", "8589934592\n");
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, 2.0);
  EXPECT_EQ(limits.cpu_version, 2);
  EXPECT_EQ(limits.cpu_file, "/sys/fs/cgroup/cpu.max");
  EXPECT_EQ(limits.memory_bytes, 8 * kGiB);
  EXPECT_EQ(limits.memory_version, 2);
}

// A job scheduler's (or systemd's) nested cgroups on v2: the tightest limit on the way up counts, wherever it is set.
TEST(Limits, TheTightestLimitAboveTheProcessCounts) {
  TempDir root;
  put(root, "/proc/self/cgroup", "0::/system.slice/job_42/step_0\n");
  put(root, "/proc/self/mountinfo",
      "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n");
  put(root, "/sys/fs/cgroup/system.slice/job_42/step_0/cpu.max", "max 100000\n");
  put(root, "/sys/fs/cgroup/system.slice/job_42/cpu.max", "400000 100000\n");
  put(root, "/sys/fs/cgroup/system.slice/cpu.max", "800000 100000\n");
  put(root, "/sys/fs/cgroup/system.slice/job_42/step_0/memory.max", "4294967296\n");
  put(root, "/sys/fs/cgroup/system.slice/job_42/memory.max", "8589934592\n");
  put(root, "/sys/fs/cgroup/system.slice/memory.max", "max\n");
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, 4.0);
  EXPECT_EQ(limits.cpu_file, "/sys/fs/cgroup/system.slice/job_42/cpu.max");
  EXPECT_EQ(limits.memory_bytes, 4 * kGiB);
  EXPECT_EQ(limits.memory_file, "/sys/fs/cgroup/system.slice/job_42/step_0/memory.max");
}

// Hybrid (v1 controllers beside an empty v2 tree, as on this repository's machine): the v1 files count, and a v2 file
// is still read for a controller v1 does not mount.
TEST(Limits, HybridReadsV1FirstAndV2ForWhatV1Lacks) {
  TempDir root;
  put(root, "/proc/self/cgroup", "4:memory:/\n1:cpu:/\n0::/\n");
  put(root, "/proc/self/mountinfo",
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  put(root, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "300000\n");
  put(root, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  put(root, "/sys/fs/cgroup/unified/cpu.max", "100000 100000\n");  // v1 already answered for the CPU
  put(root, "/sys/fs/cgroup/unified/memory.max", "2147483648\n");  // no v1 memory mount: v2's counts
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, 3.0);
  EXPECT_EQ(limits.cpu_version, 1);
  EXPECT_EQ(limits.memory_bytes, 2 * kGiB);
  EXPECT_EQ(limits.memory_version, 2);
}

// A process whose cgroup path lies outside the mount's root sees only the mount (a container's own tree); a mount
// point with a space is written \040 in mountinfo.
TEST(Limits, PathsOutsideTheMountRootAndEscapedMountPoints) {
  TempDir root;
  put(root, "/proc/self/cgroup", "1:cpu:/elsewhere/x\n");
  put(root, "/proc/self/mountinfo", "32 31 0:29 /docker/abc /cg\\040v1/cpu rw - cgroup cgroup rw,cpu\n");
  put(root, "/cg v1/cpu/cpu.cfs_quota_us", "50000\n");
  put(root, "/cg v1/cpu/cpu.cfs_period_us", "100000\n");
  const CgroupLimits limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, 0.5);
  EXPECT_EQ(limits.cpu_file, "/cg v1/cpu/cpu.cfs_quota_us");
}

TEST(Limits, NoCgroupFilesMeanNoLimits) {
  TempDir root;
  CgroupLimits limits = read_cgroup_limits(root.path());  // no /proc at all
  EXPECT_EQ(limits.cpus, std::nullopt);
  EXPECT_EQ(limits.memory_bytes, std::nullopt);
  put(root, "/proc/self/cgroup", "garbage\n\n1:cpu\n");
  put(root, "/proc/self/mountinfo", "short line\n");
  limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, std::nullopt);
  EXPECT_EQ(limits.memory_bytes, std::nullopt);
  docker_v1(root, "bogus", "bogus");  // unreadable limits are none: the affinity mask still bounds the threads
  limits = read_cgroup_limits(root.path());
  EXPECT_EQ(limits.cpus, std::nullopt);
  EXPECT_EQ(limits.memory_bytes, std::nullopt);
}

TEST(Limits, TheQuotaBoundsTheAffinityMask) {
  EXPECT_EQ(cores_within_quota(16, std::nullopt), 16);
  EXPECT_EQ(cores_within_quota(16, 2.0), 2);
  EXPECT_EQ(cores_within_quota(16, 1.5), 2);   // rounded up: two threads get 1.5 cores' time, one only 1
  EXPECT_EQ(cores_within_quota(16, 0.25), 1);  // at least one
  EXPECT_EQ(cores_within_quota(2, 8.0), 2);    // the mask bounds too
  EXPECT_EQ(cores_within_quota(0, std::nullopt), 1);
  EXPECT_EQ(cores_within_quota(16, 3.0000000001), 3);  // floating-point dust is not a fourth core
}

// On the machine the tests run on: what workers: -1 resolves to is the mask bounded by this process's own quota.
TEST(Limits, UsableCoresAreTheMaskWithinThisProcesssQuota) {
  EXPECT_EQ(usable_cores(), cores_within_quota(static_cast<int>(usable_cpus().size()), read_cgroup_limits().cpus));
}

TEST(Limits, MemlockIsTheSoftLimit) {
  struct rlimit saved {};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
  const rlim_t lowered = saved.rlim_cur == RLIM_INFINITY ? (rlim_t{64} << 10) : saved.rlim_cur / 2;
  struct rlimit low = saved;
  low.rlim_cur = lowered;
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);  // lowering the soft limit needs no privilege
  const auto seen = memlock_limit_bytes();
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
  EXPECT_EQ(seen, static_cast<uint64_t>(lowered));
  if (saved.rlim_cur == RLIM_INFINITY) {
    EXPECT_EQ(memlock_limit_bytes(), std::nullopt);
  }
}

TEST(Limits, FileSystemSizes) {
  const auto tmp = filesystem_bytes("/tmp");
  ASSERT_TRUE(tmp.has_value());
  EXPECT_GT(*tmp, 0u);
  EXPECT_EQ(filesystem_bytes("/no/such/folder"), std::nullopt);
  EXPECT_GT(physical_memory_bytes(), uint64_t{1} << 28);  // any machine that builds rn50 has 256 MiB
}

}  // namespace
}  // namespace rn50
