// core/limits.h: the limits a container or a job scheduler sets on this process: the cgroup CPU quota and memory
// limit (cgroup v1 and v2), the memlock limit and the size of a file system such as /dev/shm.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rn50 {

// This process's cgroup limits, each the tightest of its own cgroup and the cgroups above it.
struct CgroupLimits {
  std::optional<double> cpus;            // the CPU quota in CPUs (quota / period); none: no quota
  int cpu_version = 0;                   // the cgroup version it came from (1 or 2), 0 without a quota
  std::string cpu_file;                  // the file that set it
  std::optional<uint64_t> memory_bytes;  // the memory limit; none: no limit
  int memory_version = 0;
  std::string memory_file;
};

// The parsers take a file's text and give nothing both for "no limit" and for text they cannot read: an unreadable
// quota must not shrink the decode threads to one.
// cgroup v2 cpu.max: "QUOTA PERIOD" in microseconds, or "max PERIOD".
std::optional<double> parse_cpu_max(const std::string& text);
// cgroup v1 cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
std::optional<double> parse_cfs_quota(const std::string& quota_text, const std::string& period_text);
// cgroup v2 memory.max ("max" or bytes) and v1 memory.limit_in_bytes (bytes; 2^62 and above mean none: v1 writes
// "no limit" as the largest page-aligned 64-bit number).
std::optional<uint64_t> parse_memory_limit(const std::string& text);

// Reads this process's limits through /proc/self/cgroup and /proc/self/mountinfo. `root` goes before every path
// read, so that a test can hand it a fake tree; v1 hierarchies are read before v2, whose controllers a hybrid
// system leaves empty.
CgroupLimits read_cgroup_limits(const std::string& root = "");

// The threads a process keeps busy: the affinity mask's CPUs, fewer where a quota allows fewer. A fractional quota
// rounds up (1.5 CPUs keep two threads busy three quarters of the time, more work than one thread does).
int cores_within_quota(int affinity_cpus, std::optional<double> quota_cpus);

// RLIMIT_MEMLOCK's soft limit in bytes; none where unlimited.
std::optional<uint64_t> memlock_limit_bytes();

// The size of the file system holding `path` (such as /dev/shm), in bytes; none where it cannot be read.
std::optional<uint64_t> filesystem_bytes(const std::string& path);

// This machine's memory in bytes (0 if unknown).
uint64_t physical_memory_bytes();

}  // namespace rn50
