// core/affinity.cpp: reading the affinity mask, and pinning a thread, through sched_getaffinity and pthreads; the
// mask bounded by the cgroup quota.
#include "core/affinity.h"

#include <pthread.h>
#include <sched.h>

#include "core/limits.h"

namespace rn50 {

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.empty()) cpus.push_back(0);  // unreadable mask: count one CPU, as usable_cores() does
  return cpus;
}

int usable_cores() { return cores_within_quota(static_cast<int>(usable_cpus().size()), read_cgroup_limits().cpus); }

bool pin_this_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace rn50
